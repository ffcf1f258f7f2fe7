-- Gatehouse ledger, version 2: the digests of the profile and tool pool a run ran
-- under, and security events that belong to no run (refused requests).

ALTER TABLE runs ADD COLUMN profile_digest TEXT;
ALTER TABLE runs ADD COLUMN tool_pool_digest TEXT;

CREATE TABLE security_events (
    episode_id       TEXT PRIMARY KEY,
    run_id           TEXT,
    error_code       TEXT NOT NULL,
    category         TEXT NOT NULL,
    severity         TEXT NOT NULL,
    body_json        TEXT NOT NULL,
    recorded_at      TEXT NOT NULL
);
CREATE INDEX security_events_recorded ON security_events (recorded_at);
