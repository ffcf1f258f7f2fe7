-- Gatehouse ledger, version 11: which planners each worker can run.
-- A comma-separated list written with every heartbeat (template, model,
-- opencode); NULL for a worker that has not said (an older build). The shim
-- refuses at submit a recipe whose planner no live worker has.

ALTER TABLE executors ADD COLUMN planners TEXT;
