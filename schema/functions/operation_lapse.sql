-- operation_lapse: whether an approved operation may still be sent.
--
-- It says why an approved operation may no longer be sent at p_at, given
-- its approval a and its requesting token k: its approval revoked or
-- expired, granted for another provider target than (p_account,
-- p_environment) (a NULL p_account skips that comparison, and so does an
-- approval older than the binding, whose account is NULL), or its token
-- revoked; '' when it may be sent. It is the rule's only statement: the
-- claim (transition_operations), the confirmation before every call and
-- the ledger's reads all ask it. A plain SQL function, so the planner
-- inlines it into each query.
CREATE OR REPLACE FUNCTION operation_lapse(a approvals, k api_tokens, p_at timestamptz, p_account text, p_environment text)
RETURNS text LANGUAGE sql STABLE AS $$
    SELECT CASE
        WHEN a.revoked_at IS NOT NULL THEN 'approval_revoked'
        WHEN a.expires_at <= p_at THEN 'approval_expired'
        WHEN p_account IS NOT NULL AND a.account IS NOT NULL
             AND (a.account, a.environment) IS DISTINCT FROM (p_account, p_environment) THEN 'approval_mismatch'
        WHEN k.revoked_at IS NOT NULL THEN 'token_revoked'
        ELSE ''
    END
$$;
