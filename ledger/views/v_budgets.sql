-- v1: each run's budgets as last written (at its plan card, after each step, at its end):
-- what it spent and the limit of each kind (NULL: no limit), and the kind that ended it.
CREATE VIEW v_budgets AS
SELECT
    r.run_id,
    r.recipe,
    r.status,
    CAST({{JSON(r.budgets_json, used, steps)}} AS BIGINT) AS steps_used,
    CAST({{JSON(r.budgets_json, limits, max_steps)}} AS BIGINT) AS max_steps,
    CAST({{JSON(r.budgets_json, used, model_turns)}} AS BIGINT) AS model_turns_used,
    CAST({{JSON(r.budgets_json, limits, max_model_turns)}} AS BIGINT) AS max_model_turns,
    CAST({{JSON(r.budgets_json, used, prompt_tokens)}} AS BIGINT)
        + CAST({{JSON(r.budgets_json, used, completion_tokens)}} AS BIGINT) AS tokens_used,
    CAST({{JSON(r.budgets_json, limits, max_tokens)}} AS BIGINT) AS max_tokens,
    CAST({{JSON(r.budgets_json, used, cost_usd)}} AS REAL) AS cost_usd,
    CAST({{JSON(r.budgets_json, limits, max_cost_usd)}} AS REAL) AS max_cost_usd,
    CAST({{JSON(r.budgets_json, used, wall_s)}} AS REAL) AS wall_s,
    CAST({{JSON(r.budgets_json, limits, max_wall_s)}} AS REAL) AS max_wall_s,
    {{JSON(r.budgets_json, exceeded)}} AS exceeded
FROM runs r
WHERE r.budgets_json IS NOT NULL;
