-- 039_people_sessions: a person signed in with the organisation's identity
-- provider (OpenID Connect, the providers file's access: section) has a
-- console session of their own, with no token behind it.
--
-- A token's session keeps naming its token: its tenant, role and scope are
-- the token's, and revoking the token ends it. A person's session holds
-- what the access rule that admitted them gave (tenant, role, scope) and
-- who they are (person: issuer, subject, email, name, from the verified ID
-- token); it ends at sign-out or at expires_at, the ID token's expiry or
-- the session lifetime, whichever came first. Exactly one of the two.
ALTER TABLE console_sessions ALTER COLUMN token_id DROP NOT NULL;
ALTER TABLE console_sessions
    ADD COLUMN tenant_id uuid REFERENCES tenants (id) ON DELETE CASCADE,
    ADD COLUMN role      text,
    ADD COLUMN scope     text,
    ADD COLUMN person    jsonb;
ALTER TABLE console_sessions ADD CONSTRAINT console_sessions_token_or_person CHECK (
    (token_id IS NOT NULL AND person IS NULL AND tenant_id IS NULL AND role IS NULL AND scope IS NULL)
    OR (token_id IS NULL AND person IS NOT NULL AND tenant_id IS NOT NULL AND role IN ('approver', 'operator')));

-- A sign-in between the redirect to the identity provider and its return:
-- the state's SHA-256 (the state itself travels in the URL), the SHA-256
-- of the pending-sign-in cookie of the browser that started it (a state
-- comes back only to that browser), the nonce the ID token must carry,
-- the PKCE verifier and the console path to return to. A callback deletes
-- its row as it reads it, so a state is used once; rows older than
-- expires_at are deleted by the next sign-in.
CREATE TABLE signin_pending (
    state_hash   bytea PRIMARY KEY CHECK (length(state_hash) = 32),
    browser_hash bytea NOT NULL CHECK (length(browser_hash) = 32),
    nonce        text NOT NULL,
    verifier     text NOT NULL,
    return_to    text NOT NULL,
    created_at   timestamptz NOT NULL DEFAULT now(),
    expires_at   timestamptz NOT NULL CHECK (expires_at > created_at)
);
CREATE INDEX signin_pending_expires ON signin_pending (expires_at);

-- A person's approval has no token: it names the person ("person:<email
-- or subject>"), as a policy's names its policy.
-- NOT VALID, then VALIDATE: adding a CHECK scans the table under an
-- exclusive lock; validating it afterwards takes only a lock that lets
-- reads and writes go on.
ALTER TABLE approvals DROP CONSTRAINT approvals_approver_known;
ALTER TABLE approvals ADD CONSTRAINT approvals_approver_known
    CHECK (approver_token_id IS NOT NULL OR approver LIKE 'policy:%' OR approver LIKE 'person:%') NOT VALID;
ALTER TABLE approvals VALIDATE CONSTRAINT approvals_approver_known;
