-- Gatehouse ledger, version 1. Portable SQL: runs on SQLite and PostgreSQL.
-- {{BLOB}} becomes BLOB (SQLite) or BYTEA (PostgreSQL). Times are ISO-8601 UTC text.

CREATE TABLE intents (
    intent_id        TEXT PRIMARY KEY,
    idempotency_key  TEXT UNIQUE,
    request_json     TEXT NOT NULL,
    request_digest   TEXT NOT NULL,
    submitted_by     TEXT NOT NULL,
    created_at       TEXT NOT NULL
);

CREATE TABLE runs (
    run_id           TEXT PRIMARY KEY,
    intent_id        TEXT NOT NULL REFERENCES intents (intent_id),
    recipe           TEXT NOT NULL,
    objective        TEXT NOT NULL,
    mode             TEXT NOT NULL,
    status           TEXT NOT NULL,
    phase            TEXT NOT NULL,
    submitted_by     TEXT NOT NULL,
    policy_profile   TEXT NOT NULL,
    tool_pool        TEXT NOT NULL,
    plan_digest      TEXT,
    error_code       TEXT,
    error_message    TEXT,
    created_at       TEXT NOT NULL,
    updated_at       TEXT NOT NULL,
    finished_at      TEXT
);
CREATE INDEX runs_status_created ON runs (status, created_at);

CREATE TABLE plan_cards (
    run_id           TEXT PRIMARY KEY REFERENCES runs (run_id),
    plan_json        TEXT NOT NULL,
    plan_digest      TEXT NOT NULL,
    status           TEXT NOT NULL,
    created_at       TEXT NOT NULL,
    updated_at       TEXT NOT NULL
);

CREATE TABLE plan_approvals (
    approval_id      TEXT PRIMARY KEY,
    run_id           TEXT NOT NULL REFERENCES runs (run_id),
    plan_digest      TEXT NOT NULL,
    decision         TEXT NOT NULL,
    decided_by       TEXT NOT NULL,
    comment          TEXT,
    decided_at       TEXT NOT NULL,
    UNIQUE (run_id, plan_digest)
);

-- The exactly-once ledger: one row per provider or tool call.
CREATE TABLE calls (
    op_key           TEXT PRIMARY KEY,
    run_id           TEXT NOT NULL,
    step_id          TEXT NOT NULL,
    attempt          INTEGER NOT NULL,
    kind             TEXT NOT NULL,
    target           TEXT NOT NULL,
    status           TEXT NOT NULL,
    request_json     TEXT NOT NULL,
    request_digest   TEXT NOT NULL,
    response_json    TEXT,
    response_digest  TEXT,
    error_code       TEXT,
    started_at       TEXT NOT NULL,
    finished_at      TEXT,
    duration_ms      INTEGER
);
CREATE INDEX calls_run ON calls (run_id, started_at);

CREATE TABLE run_steps (
    run_id           TEXT NOT NULL REFERENCES runs (run_id),
    step_id          TEXT NOT NULL,
    position         INTEGER NOT NULL,
    driver_kind      TEXT NOT NULL,
    connector_id     TEXT NOT NULL,
    status           TEXT NOT NULL,
    op_key           TEXT,
    output_json      TEXT,
    error_code       TEXT,
    error_message    TEXT,
    finished_at      TEXT NOT NULL,
    PRIMARY KEY (run_id, step_id)
);

CREATE TABLE episodes (
    episode_id       TEXT PRIMARY KEY,
    run_id           TEXT NOT NULL,
    step_id          TEXT,
    episode_type     TEXT NOT NULL,
    result_status    TEXT NOT NULL,
    body_json        TEXT NOT NULL,
    recorded_at      TEXT NOT NULL
);
CREATE INDEX episodes_run ON episodes (run_id, recorded_at);

CREATE TABLE artifacts (
    sha256           TEXT PRIMARY KEY,
    media_type       TEXT NOT NULL,
    size_bytes       BIGINT NOT NULL,
    content          {{BLOB}} NOT NULL,
    created_at       TEXT NOT NULL
);

CREATE TABLE run_artifacts (
    run_id           TEXT NOT NULL,
    sha256           TEXT NOT NULL REFERENCES artifacts (sha256),
    step_id          TEXT NOT NULL,
    name             TEXT NOT NULL,
    PRIMARY KEY (run_id, step_id, name)
);
