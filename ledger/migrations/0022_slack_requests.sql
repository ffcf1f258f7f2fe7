-- Gatehouse ledger, version 22: the signed Slack requests already taken.
-- Slack signs each request it sends with the app's secret and a timestamp;
-- a request is honoured within five minutes of its timestamp, and once: the
-- digest of its signature is kept here for longer than that window, so a
-- copy sent again (to this shim or another) is refused.
CREATE TABLE slack_requests (
    signature_sha256 TEXT PRIMARY KEY,
    received_at TEXT NOT NULL
);
CREATE INDEX slack_requests_received ON slack_requests (received_at);
