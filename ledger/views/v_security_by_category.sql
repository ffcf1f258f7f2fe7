-- v1: refused requests (the security_events table) by category and code.
CREATE VIEW v_security_by_category AS
SELECT
    e.category,
    e.error_code,
    e.severity,
    COUNT(*) AS events,
    MIN(e.recorded_at) AS first_at,
    MAX(e.recorded_at) AS last_at
FROM security_events e
GROUP BY e.category, e.error_code, e.severity;
