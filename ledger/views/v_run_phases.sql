-- v1 (columns never change meaning; new ones may be added): one line per run, where it
-- is, since when, who approved its plan, and its workflow as DBOS holds it.
-- seconds_since_change: since the run's row last changed (status, phase, plan, budgets).
-- dbos_status: of the run's latest stretch (RUN_ID, or RUN_ID:N after its Nth decision);
-- SUCCESS for a run parked at a decision (waiting is rows only).
-- parked_at / parked_since: the wait it is parked at, if any.
CREATE VIEW v_run_phases AS
SELECT
    r.run_id,
    r.recipe,
    r.policy_profile,
    r.status,
    r.phase,
    r.submitted_by,
    r.created_at,
    r.updated_at AS changed_at,
    {{NOW_EPOCH}} - {{EPOCH(r.updated_at)}} AS seconds_since_change,
    a.decided_by AS approved_by,
    a.decided_at AS approved_at,
    w.status AS dbos_status,
    w.executor_id,
    w.application_version,
    r.parked_at,
    r.parked_since
FROM runs r
LEFT JOIN plan_approvals a
    ON a.run_id = r.run_id AND a.plan_digest = r.plan_digest AND a.decision = 'approved'
LEFT JOIN {{DBOS}}workflow_status w ON w.workflow_uuid = CASE
    WHEN COALESCE(r.stretch, 0) = 0 THEN r.run_id
    ELSE r.run_id || ':' || CAST(r.stretch AS TEXT) END;
