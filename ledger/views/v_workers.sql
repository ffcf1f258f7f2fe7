-- v2: one line per worker that sent a heartbeat: how long ago, whether it was handed
-- over as dead (reaped_at) or stopped cleanly (stopped_at), and how many workflows
-- DBOS holds running on it now (PENDING under its executor id: runs working; a run
-- waiting for a decision holds none, unless it began before runs were split).
CREATE VIEW v_workers AS
SELECT
    x.executor_id,
    x.app_version,
    x.hostname,
    x.pid,
    x.started_at,
    x.heartbeat_at,
    {{NOW_EPOCH}} - {{EPOCH(x.heartbeat_at)}} AS heartbeat_age_s,
    x.reaped_at,
    x.stopped_at,
    (SELECT COUNT(*) FROM {{DBOS}}workflow_status w
      WHERE w.executor_id = x.executor_id AND w.status = 'PENDING') AS pending_workflows
FROM executors x;
