-- Gatehouse ledger, version 13: outbound notifications, delivered at least once.
-- One row per (event, sink): delivery_id is derived from the run, the event's
-- seq, what it announces and the sink, so fanning out again adds nothing and a
-- receiver can drop repeats by it. A worker claims a due row for lease_until
-- (a worker killed mid-delivery loses its claim when the lease passes, and the
-- row is sent again with the same delivery_id). status: pending | delivered |
-- given_up.

CREATE TABLE notification_deliveries (
    delivery_id      TEXT PRIMARY KEY,
    run_id           TEXT NOT NULL,
    seq              INTEGER NOT NULL,
    event            TEXT NOT NULL,
    sink_id          TEXT NOT NULL,
    payload_json     TEXT NOT NULL,
    status           TEXT NOT NULL,
    attempts         INTEGER NOT NULL,
    next_attempt_at  TEXT NOT NULL,
    lease_owner      TEXT,
    lease_until      TEXT,
    last_error       TEXT,
    created_at       TEXT NOT NULL,
    delivered_at     TEXT
);
CREATE INDEX notification_deliveries_due ON notification_deliveries (status, next_attempt_at);
CREATE INDEX notification_deliveries_run ON notification_deliveries (run_id);
