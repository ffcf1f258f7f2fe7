-- Gatehouse ledger, version 17: liveness judged by counters, not by clocks.
-- Every heartbeat adds one to its worker's `beat`; the reaper's leader adds
-- one to the lease's `beat` every tick. A reaper (or a contender for the
-- lease) calls a worker dead (or a lease abandoned) when the counter has not
-- moved for long enough on its *own monotonic clock*. Wall-clock timestamps
-- written by different machines are never compared, so a worker whose wall
-- clock steps forward or back can neither declare the living dead nor hold
-- the lease for a day. heartbeat_at and expires_at stay, for people to read.

ALTER TABLE executors ADD COLUMN beat INTEGER NOT NULL DEFAULT 0;
ALTER TABLE leases ADD COLUMN beat INTEGER NOT NULL DEFAULT 0;
