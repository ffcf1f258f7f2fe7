-- Gatehouse ledger, version 3: a hash chain over each run's finished calls.
-- entry_hash = sha256 of the entry's fields and prev_hash; chain_seq counts from 1.
-- UNIQUE (run_id, chain_seq): two writers can never both extend the same head.

ALTER TABLE calls ADD COLUMN chain_seq INTEGER;
ALTER TABLE calls ADD COLUMN prev_hash TEXT;
ALTER TABLE calls ADD COLUMN entry_hash TEXT;
CREATE UNIQUE INDEX calls_chain ON calls (run_id, chain_seq);
