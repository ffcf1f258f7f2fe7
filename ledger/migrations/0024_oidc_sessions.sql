-- Gatehouse ledger, version 24: signing in to the dashboard with an identity provider.
-- A sign-in in progress (its state, kept hashed, with the nonce and PKCE verifier it
-- was started with) is taken once by the callback; a session the sign-in made is
-- found by the hash of its cookie, with the identity and roles of that moment.
CREATE TABLE oidc_logins (
    state_sha256 TEXT PRIMARY KEY,
    nonce TEXT NOT NULL,
    verifier TEXT NOT NULL,
    next_path TEXT NOT NULL,
    created_at TEXT NOT NULL
);
CREATE TABLE dashboard_sessions (
    session_sha256 TEXT PRIMARY KEY,
    identity TEXT NOT NULL,
    roles_json TEXT NOT NULL,
    issuer TEXT NOT NULL,
    created_at TEXT NOT NULL,
    expires_at TEXT NOT NULL
);
