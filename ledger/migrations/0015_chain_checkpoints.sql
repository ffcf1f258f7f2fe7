-- Gatehouse ledger, version 15: anchored chain heads.
-- At a run's end the worker records its chain head here (entries = chain_seq of
-- the head, 0 with the genesis hash for a run without calls) and appends the same
-- record as a line to the anchor file outside the database (GATEHOUSE_ANCHOR_FILE).
-- checkpoint_id is derived from (run_id, entries, head): a step run again adds
-- nothing. envelope_json is the DSSE envelope over the RFC 8785 body, NULL when
-- no signing key was configured.

CREATE TABLE chain_checkpoints (
    checkpoint_id  TEXT PRIMARY KEY,
    run_id         TEXT NOT NULL,
    entries        INTEGER NOT NULL,
    head           TEXT NOT NULL,
    recorded_at    TEXT NOT NULL,
    body_json      TEXT NOT NULL,
    envelope_json  TEXT
);
CREATE INDEX chain_checkpoints_run ON chain_checkpoints (run_id, entries);
