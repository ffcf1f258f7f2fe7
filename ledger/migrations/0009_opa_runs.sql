-- Gatehouse ledger, version 9: runs from OPA archives.
-- One row per run submitted as an archive. The archive bytes are an artifact of
-- the run (run_artifacts step '@opa', name 'input.opa'), stored only after the
-- archive passed validation; output_sha256 is the output archive the worker
-- packed when the run ended (name 'output.opa'). signer_json is the verified
-- signer (contracts OpaSigner), NULL for an unsigned archive; job_json the
-- contracts OpaJob the run's workflow was given (a replay is given it again).

CREATE TABLE opa_runs (
    run_id           TEXT PRIMARY KEY REFERENCES runs (run_id),
    archive_name     TEXT NOT NULL,
    archive_sha256   TEXT NOT NULL REFERENCES artifacts (sha256),
    opa_version      TEXT NOT NULL,
    execution_mode   TEXT NOT NULL,
    signer_json      TEXT,
    job_json         TEXT NOT NULL,
    output_sha256    TEXT REFERENCES artifacts (sha256),
    created_at       TEXT NOT NULL
);
