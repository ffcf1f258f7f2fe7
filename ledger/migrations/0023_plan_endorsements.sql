-- Gatehouse ledger, version 23: approvals on the way to a quorum.
-- A profile may ask for several distinct approvers (approval.quorum). Each
-- approval short of the quorum is kept here, one per person and plan digest;
-- the one that completes it writes the plan's decision (plan_approvals) with
-- the hand-off, as a lone approval does. A rejection is a decision at once.
CREATE TABLE plan_endorsements (
    run_id TEXT NOT NULL,
    plan_digest TEXT NOT NULL,
    endorsed_by TEXT NOT NULL,
    comment TEXT,
    endorsed_at TEXT NOT NULL,
    PRIMARY KEY (run_id, plan_digest, endorsed_by)
);
