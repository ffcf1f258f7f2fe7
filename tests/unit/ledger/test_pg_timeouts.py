"""The PostgreSQL connection bounds (GATEHOUSE_PG_*): read from the environment,
checked, and turned into libpq parameters."""

from __future__ import annotations

import pytest
from sqlalchemy.pool import QueuePool

from contracts import GatehouseError
from ledger import PgTimeouts, open_database, pg_connect_args, resolve_pg_timeouts, system_engine
from shim.settings import ShimSettings
from worker.runtime import WorkerSettings


def test_unset_means_the_defaults() -> None:
    assert resolve_pg_timeouts({}) == PgTimeouts()


def test_each_setting_is_read() -> None:
    t = resolve_pg_timeouts(
        {
            "GATEHOUSE_PG_CONNECT_TIMEOUT_S": "3",
            "GATEHOUSE_PG_KEEPALIVE_IDLE_S": "2",
            "GATEHOUSE_PG_KEEPALIVE_INTERVAL_S": "1",
            "GATEHOUSE_PG_KEEPALIVE_COUNT": "4",
            "GATEHOUSE_PG_TCP_USER_TIMEOUT_S": "5.5",
            "GATEHOUSE_PG_STATEMENT_TIMEOUT_S": "4",
            "GATEHOUSE_PG_IDLE_IN_TRANSACTION_S": "6",
            "GATEHOUSE_PG_ANSWER_TIMEOUT_S": "8",
            "GATEHOUSE_PG_POOL_SIZE": "6",
        }
    )
    assert t == PgTimeouts(3, 2, 1, 4, 5.5, 4.0, 6.0, 8.0, 6)
    args = pg_connect_args(t, "-c search_path=gatehouse")
    assert args["connect_timeout"] == 3
    assert args["keepalives"] == 1
    assert (args["keepalives_idle"], args["keepalives_interval"], args["keepalives_count"]) == (
        2,
        1,
        4,
    )
    assert args["tcp_user_timeout"] == 5500
    assert args["options"] == (
        "-c search_path=gatehouse -c statement_timeout=4000"
        " -c idle_in_transaction_session_timeout=6000"
    )


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("GATEHOUSE_PG_KEEPALIVE_IDLE_S", "1.5"),  # libpq takes whole seconds
        ("GATEHOUSE_PG_CONNECT_TIMEOUT_S", "1"),  # libpq's floor is 2
        ("GATEHOUSE_PG_TCP_USER_TIMEOUT_S", "0"),
        ("GATEHOUSE_PG_STATEMENT_TIMEOUT_S", "soon"),
        ("GATEHOUSE_PG_ANSWER_TIMEOUT_S", "60"),  # not more than the statement timeout
        ("GATEHOUSE_PG_POOL_SIZE", "0"),
        ("GATEHOUSE_PG_POOL_SIZE", "2.5"),
    ],
)
def test_a_bad_value_is_refused_with_its_name(name: str, value: str) -> None:
    with pytest.raises(GatehouseError) as caught:
        resolve_pg_timeouts({name: value})
    assert name in caught.value.message


def test_both_processes_read_them() -> None:
    env = {"GATEHOUSE_PG_ANSWER_TIMEOUT_S": "75", "GATEHOUSE_DATABASE_URL": "sqlite:///x.db"}
    assert ShimSettings.from_env(env).pg_timeouts.answer_s == 75
    assert WorkerSettings.from_env(env).pg_timeouts.answer_s == 75


def test_both_pools_of_a_process_keep_the_size_given() -> None:
    url = "postgresql://nobody@127.0.0.1:1/none"  # engines connect lazily: nothing is dialled
    bounds = resolve_pg_timeouts({"GATEHOUSE_PG_POOL_SIZE": "6"})
    db, dbos = open_database(url, timeouts=bounds), system_engine(url, bounds)
    assert dbos is not None
    try:
        for pool in (db.engine.pool, dbos.pool):
            assert isinstance(pool, QueuePool)
            assert (pool.size(), pool._max_overflow) == (6, 0)
    finally:
        db.dispose()
        dbos.dispose()
