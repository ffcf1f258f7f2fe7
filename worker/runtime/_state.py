"""The worker process's shared state, set once at start by ``worker.app``."""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy.engine import Engine

from ledger import Database
from worker.runtime._settings import WorkerSettings

__all__ = ["Runtime", "install", "runtime"]


@dataclass(frozen=True)
class Runtime:
    settings: WorkerSettings
    db: Database
    # The engine DBOS keeps its system tables through (PostgreSQL; None: DBOS's own).
    sys_engine: Engine | None = None


_current: list[Runtime] = []


def install(rt: Runtime) -> None:
    _current.clear()
    _current.append(rt)


def runtime() -> Runtime:
    if not _current:
        raise RuntimeError("the worker runtime is not started (worker.app.launch)")
    return _current[0]
