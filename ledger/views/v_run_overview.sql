-- One line per run: where it is, what it ran, how many calls it made.
-- psql:    SET search_path = gatehouse; SELECT * FROM v_run_overview ORDER BY created_at DESC;
-- sqlite3: SELECT * FROM v_run_overview ORDER BY created_at DESC;
CREATE VIEW v_run_overview AS
SELECT
    r.run_id,
    r.recipe,
    r.mode,
    r.status,
    r.phase,
    r.submitted_by,
    r.plan_digest,
    r.error_code,
    r.created_at,
    r.finished_at,
    (SELECT COUNT(*) FROM run_steps s WHERE s.run_id = r.run_id) AS steps_done,
    (SELECT COUNT(*) FROM calls c WHERE c.run_id = r.run_id) AS calls,
    (SELECT a.decided_by FROM plan_approvals a
      WHERE a.run_id = r.run_id AND a.plan_digest = r.plan_digest) AS decided_by
FROM runs r;
