"""``python -m bench.hitl.peer_dbos URL``: bare DBOS Transact as a peer.

A workflow: a compile step, ``DBOS.set_event`` with the plan digest (its plan
card), ``DBOS.recv`` for the approval, three steps each inserting one row. A
run: ``DBOS.start_workflow``, ``DBOS.get_event`` for the card, ``DBOS.send``
of the approval at once, the result. Started directly, not through a queue.

``phases`` (asked after a sequential pass) is where its runs' time went, from
DBOS's own records, beside Gatehouse's (``GatehouseSystem.phases``): submit (the
workflow's row) → plan card (its ``set_event``), and approval (this process's
clock just before ``DBOS.send``) → first step's start.

``python -m bench.hitl.peer_dbos URL handoff``: the same run built as Gatehouse
builds it, on bare DBOS: the workflow that puts the plan on its card ends there,
and the approval queues a new workflow for the steps (``Queue.enqueue``), which a
worker's queue poll (every ``HANDOFF_POLL_S``) claims and starts. Its approval →
first step is the floor of that design, the part of Gatehouse's that is DBOS's
queue hand-off and nothing of Gatehouse. Its own process: the fast poll would add
its cost to the peer above.
"""

from __future__ import annotations

import hashlib
import json
import sys
import time
import uuid
from typing import Any

import sqlalchemy as sa
from dbos import DBOS, SetWorkflowID

from bench.hitl import _counting
from bench.hitl._peer import serve
from bench.hitl.steps import APPROVAL_TO_STEP, DBOS_STEP, SUBMIT_TO_CARD
from ledger import sqlalchemy_url

STEPS = ["s1", "s2", "s3"]
_engine: list[sa.Engine] = []
HANDOFF_QUEUE = "bench_handoff"
# The hand-off peer's queue poll: a waiting stretch is claimed within this (about half
# of it on average), where Gatehouse's worker is told at once (LISTEN/NOTIFY).
HANDOFF_POLL_S = 0.002


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


@DBOS.workflow()
def card_workflow(run_id: str) -> str:
    """The hand-off's first stretch: compile, the plan on its card, and the end."""
    digest = compile_step()
    DBOS.set_event("card", digest)
    return digest


@DBOS.workflow()
def steps_workflow(run_id: str) -> list[str]:
    """The hand-off's next stretch, queued by the approval: the steps (and an event
    saying so: a handle's ``get_result`` on a queued workflow polls once a second)."""
    for step in STEPS:
        insert_step(run_id, step)
    DBOS.set_event("done", STEPS)
    return STEPS


class DbosSystem:
    def __init__(self, url: str, *, handoff: bool = False) -> None:
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
        self._handoff = None
        if handoff:
            self._handoff = DBOS.register_queue(HANDOFF_QUEUE, polling_interval_sec=HANDOFF_POLL_S)
        self._sent: dict[str, float] = {}  # workflow id → epoch ms just before its approval

    def one_run(self, variant: str) -> None:
        if self._handoff is not None:
            self._handed_off()
            return
        handle = DBOS.start_workflow(hitl_workflow, uuid.uuid4().hex)
        digest = DBOS.get_event(handle.workflow_id, "card", timeout_seconds=60)
        self._sent[handle.workflow_id] = time.time() * 1000
        DBOS.send(handle.workflow_id, digest, "approval")
        if handle.get_result() != STEPS:
            raise RuntimeError("dbos run ended without its steps")

    def _handed_off(self) -> None:
        assert self._handoff is not None
        run_id = uuid.uuid4().hex
        first = DBOS.start_workflow(card_workflow, run_id)
        if DBOS.get_event(first.workflow_id, "card", timeout_seconds=60) is None:
            raise RuntimeError("the card's stretch put no plan on its card")
        steps_id = f"{run_id}:1"
        self._sent[steps_id] = time.time() * 1000
        with SetWorkflowID(steps_id):
            self._handoff.enqueue(steps_workflow, run_id)
        if DBOS.get_event(steps_id, "done", timeout_seconds=60) != STEPS:
            raise RuntimeError("dbos hand-off ended without its steps")

    def phases(self, variant: str, since_ms: float) -> dict[str, list[float]]:
        """Ms of each phase of the runs started from ``since_ms`` on (names as
        ``GatehouseSystem.phases`` gives them; one variant)."""
        with _engine[0].connect() as conn:
            rows = conn.execute(
                sa.text(
                    "SELECT w.workflow_uuid, w.created_at, o.function_name,"
                    " o.started_at_epoch_ms, o.completed_at_epoch_ms"
                    " FROM dbos.workflow_status w JOIN dbos.operation_outputs o"
                    " ON o.workflow_uuid = w.workflow_uuid"
                    " WHERE w.created_at >= :t ORDER BY w.workflow_uuid, o.function_id"
                ),
                {"t": int(since_ms)},
            ).all()
        runs: dict[str, dict[str, Any]] = {}
        for wf, created, name, began, ended in rows:
            if str(wf) in self._sent and self._handoff is not None:  # a hand-off's steps
                if name == DBOS_STEP:
                    runs.setdefault(str(wf), {}).setdefault("first_step", float(began))
                continue
            run = runs.setdefault(str(wf), {"created": float(created)})
            if name == "DBOS.setEvent":
                run.setdefault("card", float(ended))
            elif name == DBOS_STEP:
                run.setdefault("first_step", float(began))
        out: dict[str, list[float]] = {SUBMIT_TO_CARD: [], APPROVAL_TO_STEP: []}
        if self._handoff is not None:
            out[APPROVAL_TO_STEP] = [
                run["first_step"] - self._sent[wf]
                for wf, run in runs.items()
                if wf in self._sent and "first_step" in run
            ]
            out[SUBMIT_TO_CARD] = [r["card"] - r["created"] for r in runs.values() if "card" in r]
            return out
        for wf, run in runs.items():
            if "card" in run and "first_step" in run and wf in self._sent:
                out[SUBMIT_TO_CARD].append(run["card"] - run["created"])
                out[APPROVAL_TO_STEP].append(run["first_step"] - self._sent[wf])
        return out

    def counts(self) -> dict[str, int]:
        return _counting.snapshot()

    def close(self) -> None:
        DBOS.destroy(workflow_completion_timeout_sec=0)
        _engine[0].dispose()


if __name__ == "__main__":
    serve(DbosSystem(sys.argv[1], handoff=sys.argv[2:] == ["handoff"]))
