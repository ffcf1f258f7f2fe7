-- Gatehouse ledger, version 21: the runs that have a workflow, indexed.
-- The reaper's leader looks every tick for unfinished runs whose current
-- workflow was cancelled through DBOS. A parked run (waiting for a person)
-- has no workflow to cancel, and plans waiting for people are the bulk of
-- the unfinished runs: this index holds only the others.
CREATE INDEX runs_live ON runs (created_at) WHERE finished_at IS NULL AND parked_wait IS NULL;
