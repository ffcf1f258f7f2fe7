-- Gatehouse ledger, version 7: plan repair.
-- plan_revisions: every plan a run's plan card has held, in order. Revision 1 is the
--   gated compile; each later one a repaired remainder, with the digest it replaced
--   and what changed. An approval names one revision's digest.
-- plan_cards.revision / previous_digest / changes_json: the card shows the newest.

CREATE TABLE plan_revisions (
    run_id           TEXT NOT NULL REFERENCES runs (run_id),
    revision         INTEGER NOT NULL,
    plan_json        TEXT NOT NULL,
    plan_digest      TEXT NOT NULL,
    previous_digest  TEXT,
    changes_json     TEXT,
    created_at       TEXT NOT NULL,
    PRIMARY KEY (run_id, revision),
    UNIQUE (run_id, plan_digest)
);
ALTER TABLE plan_cards ADD COLUMN revision INTEGER NOT NULL DEFAULT 1;
ALTER TABLE plan_cards ADD COLUMN previous_digest TEXT;
ALTER TABLE plan_cards ADD COLUMN changes_json TEXT;
