"""All of Gatehouse's SQL: migrations, the call ledger, runs, evidence, views.

Functions take a connection and never open transactions of their own, so the
caller decides what commits together.
"""

from ledger import (
    anchors,
    calls,
    cancels,
    chain,
    checkpoints,
    events,
    evidence,
    intents,
    plan_cards,
    policy_versions,
    recorded_plans,
    run_views,
    runs,
    slack_messages,
    stretches,
)
from ledger._config_file import (
    CONFIG_FILE,
    Telemetry,
    Tls,
    resolve_database_url,
    resolve_telemetry,
    resolve_tls,
)
from ledger._db import (
    APP_SCHEMA,
    DEFAULT_DATABASE_URL,
    SQLITE_POOL_SIZE,
    Conn,
    Database,
    database_unreachable,
    db_clock,
    iso,
    no_space,
    now_iso,
    open_database,
    sqlalchemy_url,
    storage_full,
    system_engine,
)
from ledger._inhost import WakeSocket, wake_folder
from ledger._migrate import add_missing_views, migrate, pending_migrations
from ledger._net import PgTimeouts, resolve_pg_timeouts
from ledger._net import connect as pg_connect
from ledger._net import connect_args as pg_connect_args

__all__ = [
    "APP_SCHEMA",
    "CONFIG_FILE",
    "DEFAULT_DATABASE_URL",
    "SQLITE_POOL_SIZE",
    "Conn",
    "Database",
    "PgTimeouts",
    "Telemetry",
    "Tls",
    "WakeSocket",
    "add_missing_views",
    "anchors",
    "calls",
    "cancels",
    "chain",
    "checkpoints",
    "database_unreachable",
    "db_clock",
    "events",
    "evidence",
    "intents",
    "iso",
    "migrate",
    "no_space",
    "now_iso",
    "open_database",
    "pending_migrations",
    "pg_connect",
    "pg_connect_args",
    "plan_cards",
    "policy_versions",
    "recorded_plans",
    "resolve_database_url",
    "resolve_pg_timeouts",
    "resolve_telemetry",
    "resolve_tls",
    "run_views",
    "runs",
    "slack_messages",
    "sqlalchemy_url",
    "storage_full",
    "stretches",
    "system_engine",
    "wake_folder",
]
