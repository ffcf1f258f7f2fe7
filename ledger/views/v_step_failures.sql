-- v1: one line per plan step that ended in an error. Stalls are oc_stalled; timeouts
-- handler_timeout and oc_timeout, where ladder names the rungs an OpenCode step's
-- timeout ladder went through (revert, shrink) before it gave up.
CREATE VIEW v_step_failures AS
SELECT
    s.run_id,
    s.step_id,
    s.position,
    s.driver_kind,
    s.connector_id,
    s.error_code,
    s.error_message,
    s.finished_at,
    CASE WHEN s.error_code = 'oc_stalled' THEN 1 ELSE 0 END AS is_stall,
    CASE WHEN s.error_code IN ('handler_timeout', 'oc_timeout') THEN 1 ELSE 0 END AS is_timeout,
    {{JSON(s.output_json, ladder)}} AS ladder
FROM run_steps s
WHERE s.error_code IS NOT NULL;
