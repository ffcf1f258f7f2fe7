-- Gatehouse ledger, version 16: every policy profile, tool pool and recipe version a
-- worker ran with, content-addressed by the SHA-256 of the file's bytes (the digest a
-- run records). A replay holds a run to the versions it ran under, whatever the
-- files say today. Rows are only ever added.

CREATE TABLE policy_versions (
    digest      TEXT PRIMARY KEY,
    kind        TEXT NOT NULL,
    policy_id   TEXT NOT NULL,
    body        TEXT NOT NULL,
    stored_at   TEXT NOT NULL
);
