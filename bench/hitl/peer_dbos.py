"""``python -m bench.hitl.peer_dbos URL``: bare DBOS Transact as a peer.

A workflow: a compile step, ``DBOS.set_event`` with the plan digest (its plan
card), ``DBOS.recv`` for the approval, three steps each inserting one row. A
run: ``DBOS.start_workflow``, ``DBOS.get_event`` for the card, ``DBOS.send``
of the approval at once, the result. Started directly, not through a queue.
"""

from __future__ import annotations

import hashlib
import json
import sys
import uuid

import sqlalchemy as sa
from dbos import DBOS

from bench.hitl import _counting
from bench.hitl._peer import serve
from bench.hitl.steps import DBOS_STEP
from ledger._db import sqlalchemy_url

STEPS = ["s1", "s2", "s3"]
_engine: list[sa.Engine] = []


@DBOS.step()
def compile_step() -> str:
    return hashlib.sha256(json.dumps(STEPS).encode()).hexdigest()


@DBOS.step(name=DBOS_STEP)
def insert_step(run_id: str, step: str) -> None:
    with _engine[0].begin() as conn:
        conn.execute(
            sa.text("INSERT INTO bench_rows (run_id, step) VALUES (:r, :s)"),
            {"r": run_id, "s": step},
        )


@DBOS.workflow()
def hitl_workflow(run_id: str) -> list[str]:
    digest = compile_step()
    DBOS.set_event("card", digest)
    answer = DBOS.recv("approval", timeout_seconds=60)
    if answer != digest:
        raise RuntimeError("approval names another plan")
    for step in STEPS:
        insert_step(run_id, step)
    return STEPS


class DbosSystem:
    def __init__(self, url: str) -> None:
        _counting.install(None)
        _engine.append(sa.create_engine(sqlalchemy_url(url), pool_size=20, max_overflow=4))
        with _engine[0].begin() as conn:
            conn.execute(sa.text("CREATE TABLE IF NOT EXISTS bench_rows (run_id TEXT, step TEXT)"))
        DBOS(
            config={
                "name": "bench-dbos",
                "system_database_url": url,
                "log_level": "WARNING",
                "sys_db_pool_size": 20,
            }
        )
        DBOS.launch()

    def one_run(self, variant: str) -> None:
        handle = DBOS.start_workflow(hitl_workflow, uuid.uuid4().hex)
        digest = DBOS.get_event(handle.workflow_id, "card", timeout_seconds=60)
        DBOS.send(handle.workflow_id, digest, "approval")
        if handle.get_result() != STEPS:
            raise RuntimeError("dbos run ended without its steps")

    def counts(self) -> dict[str, int]:
        return _counting.snapshot()

    def close(self) -> None:
        DBOS.destroy(workflow_completion_timeout_sec=0)
        _engine[0].dispose()


if __name__ == "__main__":
    serve(DbosSystem(sys.argv[1]))
