-- The exactly-once ledger as an operator reads it: one line per provider or tool call.
-- A call still 'started' long after started_at was interrupted mid-flight.
CREATE VIEW v_ledger AS
SELECT
    c.run_id,
    c.step_id,
    c.attempt,
    c.kind,
    c.target,
    c.status,
    c.error_code,
    c.op_key,
    c.request_digest,
    c.response_digest,
    c.started_at,
    c.finished_at,
    c.duration_ms
FROM calls c;
