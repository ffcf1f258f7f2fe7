-- Gatehouse ledger, version 26: Slack messages a bot posted about a plan.
-- A Slack sink that posts with the Web API (a bot token) keeps each message it
-- posted about a plan waiting for a decision: the run, the plan's digest, where the
-- message is (channel, ts) and what it said (message_json: text and blocks). While
-- closed_at is NULL the message is open; a notifier closes it once the plan can no
-- longer be decided (decided anywhere, expired, replaced, the run ended), in one
-- transaction with the delivery that updates it in Slack (chat.update), and keeps
-- the line it was closed with.
CREATE TABLE slack_messages (
    sink_id       TEXT NOT NULL,
    channel       TEXT NOT NULL,
    ts            TEXT NOT NULL,
    run_id        TEXT NOT NULL,
    plan_digest   TEXT NOT NULL,
    seq           INTEGER NOT NULL,
    delivery_id   TEXT NOT NULL,
    message_json  TEXT NOT NULL,
    posted_at     TEXT NOT NULL,
    closed_at     TEXT,
    closed_line   TEXT,
    PRIMARY KEY (sink_id, channel, ts)
);
-- only the open messages are looked through (each notifier pass that closes them)
CREATE INDEX slack_messages_open ON slack_messages (posted_at, ts) WHERE closed_at IS NULL;
CREATE INDEX slack_messages_run ON slack_messages (run_id);
