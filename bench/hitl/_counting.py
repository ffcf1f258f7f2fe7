"""Count SQL statements and commits of every SQLAlchemy engine in this process.

Installed at class level on ``Engine``, so it sees Gatehouse's own engines and
DBOS's (system database) alike. A commit is a *write* commit when its
transaction ran an INSERT, UPDATE or DELETE; read-only transactions (status
polls, queue polls that found nothing) are counted apart. The totals are
written to a JSON file every 50 ms for the benchmark driver to read.

Each count is kept twice: for the whole process, and (``wf_*``) for what ran
inside a DBOS workflow (its steps and transactions, DBOS's checkpoints of
them), which leaves out the background: queue polls, heartbeats, the reaper.

With BENCH_STATEMENT_LOG set, every statement made inside a workflow is also
appended to that file (the workflow id, then the statement's first 160
characters), to see which statements a figure counts.
"""

from __future__ import annotations

import json
import os
import threading
from pathlib import Path
from typing import Any

from dbos import DBOS
from sqlalchemy import event
from sqlalchemy.engine import Connection, Engine

__all__ = ["install", "read_counts", "snapshot"]

_WRITES = ("INSERT", "UPDATE", "DELETE", "MERGE")
_lock = threading.Lock()
_KEYS = ("statements", "commits", "write_commits", "rollbacks")
_counts = dict.fromkeys((*_KEYS, *(f"wf_{k}" for k in _KEYS)), 0)
_STATEMENT_LOG = os.environ.get("BENCH_STATEMENT_LOG")


def _bump(key: str) -> None:
    in_workflow = DBOS.workflow_id is not None
    with _lock:
        _counts[key] += 1
        if in_workflow:
            _counts[f"wf_{key}"] += 1


def _before_execute(conn: Connection, *args: Any) -> None:
    statement = str(args[1]).lstrip().upper()
    _bump("statements")
    if _STATEMENT_LOG and DBOS.workflow_id is not None:
        line = " ".join(str(args[1]).split())[:160]
        with _lock, Path(_STATEMENT_LOG).open("a", encoding="utf-8") as log:
            log.write(f"{DBOS.workflow_id}\t{line}\n")
    if statement.startswith(_WRITES) or (statement.startswith("WITH") and "INSERT" in statement):
        conn.info["bench_wrote"] = True


def _commit(conn: Connection) -> None:
    _bump("commits")
    if conn.info.pop("bench_wrote", False):
        _bump("write_commits")


def _rollback(conn: Connection) -> None:
    _bump("rollbacks")
    conn.info.pop("bench_wrote", None)


def snapshot() -> dict[str, int]:
    with _lock:
        return dict(_counts)


def install(out: Path | None) -> None:
    event.listen(Engine, "before_cursor_execute", _before_execute)
    event.listen(Engine, "commit", _commit)
    event.listen(Engine, "rollback", _rollback)
    if out is None:
        return

    def dump() -> None:
        tmp = out.with_suffix(".tmp")
        while True:
            tmp.write_text(json.dumps(snapshot()), encoding="utf-8")
            tmp.replace(out)
            threading.Event().wait(0.05)

    threading.Thread(target=dump, name="bench-counts", daemon=True).start()


def read_counts(path: Path) -> dict[str, int]:
    data = json.loads(path.read_text(encoding="utf-8"))
    return {str(k): int(v) for k, v in data.items()}
