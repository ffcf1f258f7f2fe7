-- Gatehouse ledger, version 6: cancelling a run.
-- One row per cancelled run, first request wins (cancel is idempotent). source is
-- 'gatehouse' (POST /runs/{id}/cancel) or 'dbos' (the workflow was cancelled through
-- DBOS and a worker's sweep found it). observed_at names the boundary where the flow
-- stopped ('@compile', '@approval' or a plan step id): a replay stops there too.

CREATE TABLE run_cancels (
    run_id           TEXT PRIMARY KEY REFERENCES runs (run_id),
    requested_by     TEXT NOT NULL,
    reason           TEXT,
    source           TEXT NOT NULL,
    requested_at     TEXT NOT NULL,
    observed_at      TEXT
);
