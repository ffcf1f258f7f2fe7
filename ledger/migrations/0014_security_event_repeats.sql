-- Gatehouse ledger, version 14: a refused request that repeats is counted on one row.
-- A repeat of the same refusal (code, source address, identity or none, method and
-- route template: the fingerprint) while its row is open (within the shim's window of
-- the row's recorded_at) adds to repeat_count and moves last_seen_at instead of
-- inserting, so a flood of bad requests leaves a bounded number of rows.
-- Rows written before this version stand alone: no fingerprint, repeat_count 1.

ALTER TABLE security_events ADD COLUMN fingerprint TEXT;
ALTER TABLE security_events ADD COLUMN repeat_count INTEGER NOT NULL DEFAULT 1;
ALTER TABLE security_events ADD COLUMN last_seen_at TEXT;
UPDATE security_events SET last_seen_at = recorded_at;
CREATE INDEX security_events_fingerprint ON security_events (fingerprint, recorded_at);
