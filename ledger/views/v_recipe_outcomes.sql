-- v1: how runs of each recipe under each profile ended. success_rate is succeeded over
-- finished (NULL while none finished); planned counts plan-only runs that ended well.
CREATE VIEW v_recipe_outcomes AS
SELECT
    r.recipe,
    r.policy_profile,
    COUNT(*) AS runs,
    SUM(CASE WHEN r.status = 'succeeded' THEN 1 ELSE 0 END) AS succeeded,
    SUM(CASE WHEN r.status = 'planned' THEN 1 ELSE 0 END) AS planned,
    SUM(CASE WHEN r.status = 'failed' THEN 1 ELSE 0 END) AS failed,
    SUM(CASE WHEN r.status = 'rejected' THEN 1 ELSE 0 END) AS rejected,
    SUM(CASE WHEN r.status = 'cancelled' THEN 1 ELSE 0 END) AS cancelled,
    SUM(CASE WHEN r.finished_at IS NULL THEN 1 ELSE 0 END) AS unfinished,
    CAST(SUM(CASE WHEN r.status = 'succeeded' THEN 1 ELSE 0 END) AS REAL)
        / NULLIF(SUM(CASE WHEN r.finished_at IS NOT NULL THEN 1 ELSE 0 END), 0) AS success_rate
FROM runs r
GROUP BY r.recipe, r.policy_profile;
