-- v1: one line per provider or tool call with how long it took and, for model calls,
-- the tokens the provider reported (NULL where it reported none). Cost per run is in
-- v_budgets (prices are per profile, not stored per call).
CREATE VIEW v_calls AS
SELECT
    c.run_id,
    c.step_id,
    c.attempt,
    c.kind,
    c.target,
    c.status,
    c.error_code,
    c.op_key,
    c.started_at,
    c.finished_at,
    c.duration_ms,
    {{JSON(c.response_json, output, usage, model)}} AS model,
    CAST({{JSON(c.response_json, output, usage, prompt_tokens)}} AS BIGINT) AS prompt_tokens,
    CAST({{JSON(c.response_json, output, usage, completion_tokens)}} AS BIGINT) AS completion_tokens
FROM calls c;
