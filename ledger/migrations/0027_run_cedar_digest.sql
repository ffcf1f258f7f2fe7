-- Gatehouse ledger, version 27: the Cedar policy set a run is held to.
-- runs.cedar_digest: the SHA-256 of the .cedar file its profile named when the run
-- began (NULL: its profile names none), kept in policy_versions (kind 'cedar') like
-- the profile and tool pool, so a replay holds the run to the policy set of its time.
ALTER TABLE runs ADD COLUMN cedar_digest TEXT;
