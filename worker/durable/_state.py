"""The DBOS datasource this worker's atomic records commit through, set at launch."""

from __future__ import annotations

from dbos import SQLAlchemyDatasource

__all__ = ["datasource", "set_datasource"]

_current: list[SQLAlchemyDatasource] = []


def set_datasource(ds: SQLAlchemyDatasource) -> None:
    _current.clear()
    _current.append(ds)


def datasource() -> SQLAlchemyDatasource:
    if not _current:
        raise RuntimeError("DBOS is not launched in this process (worker.app.launch)")
    return _current[0]
