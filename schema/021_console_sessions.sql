-- 021_console_sessions: the console's cookie names a session, never a token.
--
-- Before, the console kept the pasted API token itself in its cookie: a
-- copied cookie was the token, it outlived the browser (Max-Age 8 h), and
-- signing out only asked the browser to forget it. Now signing in creates
-- a session of the token: a random 256-bit id goes into the cookie (a
-- session cookie, gone with the browser), and only its SHA-256 is stored
-- here, as for tokens. A session ends at expires_at, at sign-out (its row
-- is deleted) and when its token is revoked (auth.Tokens.Revoke deletes
-- the token's sessions in the revoking transaction; the lookup also
-- requires the token unrevoked).
CREATE TABLE console_sessions (
    id_hash    bytea PRIMARY KEY CHECK (length(id_hash) = 32),
    token_id   uuid NOT NULL REFERENCES api_tokens (id) ON DELETE CASCADE,
    created_at timestamptz NOT NULL DEFAULT now(),
    expires_at timestamptz NOT NULL CHECK (expires_at > created_at)
);

-- Revoking a token deletes its sessions; signing in deletes expired ones.
CREATE INDEX console_sessions_token ON console_sessions (token_id);
CREATE INDEX console_sessions_expires ON console_sessions (expires_at);
