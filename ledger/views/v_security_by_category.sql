-- v2: refused requests (the security_events table) by category and code. A row
-- stands for repeat_count refusals (repeats of one refusal within the shim's window).
CREATE VIEW v_security_by_category AS
SELECT
    e.category,
    e.error_code,
    e.severity,
    SUM(e.repeat_count) AS events,
    COUNT(*) AS event_rows,
    MIN(e.recorded_at) AS first_at,
    MAX(COALESCE(e.last_seen_at, e.recorded_at)) AS last_at
FROM security_events e
GROUP BY e.category, e.error_code, e.severity;
