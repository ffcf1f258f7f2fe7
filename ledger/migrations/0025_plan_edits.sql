-- Gatehouse ledger, version 25: plans an approver edited before deciding.
-- An edit rejects the plan it was made from and starts a run of its own with the
-- edited plan (run_id), linked to the run it came from and the digest it replaced;
-- its plan is decided by someone other than its editor and the original submitter.
CREATE TABLE plan_edits (
    run_id TEXT PRIMARY KEY,
    parent_run_id TEXT NOT NULL,
    previous_digest TEXT NOT NULL,
    edited_by TEXT NOT NULL,
    edited_at TEXT NOT NULL
);
CREATE UNIQUE INDEX plan_edits_once ON plan_edits (parent_run_id, previous_digest);
