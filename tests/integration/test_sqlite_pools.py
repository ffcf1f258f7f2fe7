"""SQLite pools send nothing to check a connection before a transaction: a file has no
session to lose. Gatehouse's own pool never did; DBOS's, which DBOS makes itself on
SQLite, is told not to (``worker.durable._launch.dbos_config``)."""

from __future__ import annotations

from typing import Any

import pytest
import sqlalchemy as sa
from dbos._dbos import _get_dbos_instance

from tests.support.stack import Stack
from worker.runtime import runtime

pytestmark = pytest.mark.parametrize("backend", ["sqlite"], indirect=True)


def test_no_statement_checks_a_pooled_connection(
    stack: Stack, monkeypatch: pytest.MonkeyPatch
) -> None:
    engines: dict[str, sa.Engine] = {
        "gatehouse": runtime().db.engine,
        "dbos": _get_dbos_instance()._sys_db.engine,
    }
    pings = dict.fromkeys(engines, 0)
    checkouts = dict.fromkeys(engines, 0)

    def counted(name: str, ping: Any) -> Any:
        def do_ping(dbapi_connection: Any) -> Any:
            pings[name] += 1
            return ping(dbapi_connection)

        return do_ping

    def checked_out(name: str) -> Any:
        def seen(*_args: Any) -> None:
            checkouts[name] += 1

        return seen

    listeners = {name: checked_out(name) for name in engines}
    for name, engine in engines.items():
        monkeypatch.setattr(engine.dialect, "do_ping", counted(name, engine.dialect.do_ping))
        sa.event.listen(engine, "checkout", listeners[name])
    try:
        stack.finished_run(steps=1)
    finally:
        for name, engine in engines.items():
            sa.event.remove(engine, "checkout", listeners[name])
    for name in engines:
        assert checkouts[name] > 0, f"{name}'s pool lent nothing: the run went elsewhere"
        assert pings[name] == 0, f"{name}'s pool checked {pings[name]} connections with a ping"
