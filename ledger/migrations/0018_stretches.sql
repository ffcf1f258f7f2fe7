-- Gatehouse ledger, version 18: a run is split at every human decision.
-- The stretch of a run between two decisions is its own DBOS workflow
-- (stretch 0 is the workflow named by the run id, stretch n > 0 is
-- "RUN_ID:n"). A stretch that reaches a decision nobody has made yet parks
-- the run here and ends: no queue slot, no thread. Whoever writes the
-- decision (an approval, a rejection, a cancel, an operator's resolution, a
-- follow-up message, the expiry sweep) clears the park and enqueues the next
-- stretch in the same transaction.
--   stretch       the run's latest stretch; NULL for a run begun before this
--                 version (one workflow that waits in place to its end)
--   parked_wait   the flow's wait the run is parked at (0 = its first wait);
--                 NULL while a stretch is queued or running
--   parked_at     that wait's boundary: @approval, @input-2, an op_key...
--   parked_until  when the wait expires (ISO 8601); NULL: it never does
--   parked_since  when the run parked there
--   parked_version the application version of the stretch that parked it: the
--                 next stretch is enqueued under it (a run stays on its version)
ALTER TABLE runs ADD COLUMN stretch INTEGER;
ALTER TABLE runs ADD COLUMN parked_wait INTEGER;
ALTER TABLE runs ADD COLUMN parked_at TEXT;
ALTER TABLE runs ADD COLUMN parked_until TEXT;
ALTER TABLE runs ADD COLUMN parked_since TEXT;
ALTER TABLE runs ADD COLUMN parked_version TEXT;
CREATE INDEX runs_parked_until ON runs (parked_until) WHERE parked_wait IS NOT NULL;
