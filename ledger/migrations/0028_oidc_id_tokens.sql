-- Gatehouse ledger, version 28: an ID token opens one session, once.
-- A sign-in that opened a session keeps what names its ID token (a SHA-256 of the
-- issuer and the token's jti, or of the token as signed when it has none) until the
-- token expires: a second exchange of the same token finds its row and is refused.
-- Rows past expires_at are swept as new ones are written.
CREATE TABLE oidc_id_tokens (
    token_sha256 TEXT PRIMARY KEY,
    identity TEXT NOT NULL,
    used_at TEXT NOT NULL,
    expires_at TEXT NOT NULL
);
CREATE INDEX oidc_id_tokens_expiry ON oidc_id_tokens (expires_at);
