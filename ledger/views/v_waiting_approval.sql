-- v1: runs whose plan card waits for a decision (ORDER BY plan_created_at: oldest first).
CREATE VIEW v_waiting_approval AS
SELECT
    r.run_id,
    r.recipe,
    r.objective,
    r.submitted_by,
    p.plan_digest,
    p.created_at AS plan_created_at,
    {{NOW_EPOCH}} - {{EPOCH(p.created_at)}} AS seconds_waiting
FROM runs r
JOIN plan_cards p ON p.run_id = r.run_id
WHERE r.status = 'waiting_approval';
