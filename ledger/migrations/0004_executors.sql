-- Gatehouse ledger, version 4: worker heartbeats and the reaper's leader lease.

CREATE TABLE executors (
    executor_id      TEXT PRIMARY KEY,
    app_version      TEXT NOT NULL,
    hostname         TEXT NOT NULL,
    pid              INTEGER NOT NULL,
    started_at       TEXT NOT NULL,
    heartbeat_at     TEXT NOT NULL,
    reaped_at        TEXT
);

CREATE TABLE leases (
    name             TEXT PRIMARY KEY,
    holder           TEXT NOT NULL,
    expires_at       TEXT NOT NULL
);
