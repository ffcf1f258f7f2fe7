-- Gatehouse ledger, version 5: trace digests, seeds, forks and in-doubt resolutions.
-- runs.trace_digest: over the run's ordered calls and plan digest, written at the end.
-- runs.random_seed: the seed every random choice of the run was drawn from.
-- runs.parent_run_id / fork_from_step: a fork and the plan step (1-based) it went live from.
-- calls.resolved_by / resolved_at: who said whether an in-doubt call took effect.

ALTER TABLE runs ADD COLUMN trace_digest TEXT;
ALTER TABLE runs ADD COLUMN random_seed TEXT;
ALTER TABLE runs ADD COLUMN parent_run_id TEXT;
ALTER TABLE runs ADD COLUMN fork_from_step INTEGER;
ALTER TABLE calls ADD COLUMN resolved_by TEXT;
ALTER TABLE calls ADD COLUMN resolved_at TEXT;
CREATE INDEX calls_in_doubt ON calls (status) WHERE status = 'in_doubt';
