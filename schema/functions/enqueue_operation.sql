-- enqueue_operation: the agent's enqueue in one round trip.
--
-- Enqueue is on the hot path of every agent action. enqueue_operation does
-- its whole transaction in one statement: the operation (unique per tenant,
-- action and key), one use of its approval, the created event and the
-- dispatch message in the outbox. An approval that does not authorise the
-- operation raises SQLSTATE AL403 with the contract's code as the message
-- and the reason as the detail, which rolls everything back. ledger.Enqueue
-- documents the rules; this is their only implementation.
--
-- p_client_key is the key the caller sent when the action derives the
-- operation's key from its params (a business key), kept for tracing; it
-- is stored with a new operation and decides nothing.
--
-- requires: scope_admits, key_tombstone_reuse
--
-- p_scope is the new operation's access scope (schema 024): the scope of
-- the token that requested it, or of the operation a compensation is for;
-- NULL for a token of the whole tenant. The approval must admit it
-- (scope_admits): an approval of another scope is no approval here, and
-- is refused exactly as a missing one.
--
-- p_traceparent is the W3C trace context of the enqueue (schema 030), kept
-- with the operation and its dispatch message; NULL without tracing. It
-- decides nothing.
--
-- p_external_key is the key ledger.ExternalKeyOf derives from the
-- operation's tenant, action and key (schema 041). A key that retention
-- pruned left a tombstone, which key_tombstone_reuse judges once the
-- operation is inserted: its external key is then the tombstone's, or the
-- request is refused (AL409). The external key stored is returned.
CREATE OR REPLACE FUNCTION enqueue_operation(
    p_id uuid, p_tenant uuid, p_action text, p_key text, p_provider text, p_params jsonb,
    p_fingerprint text, p_approval uuid, p_token uuid, p_external_key text, p_now timestamptz,
    p_actor text, p_subject text, p_msg_id text, p_payload bytea, p_client_key text DEFAULT NULL,
    p_scope text DEFAULT NULL, p_traceparent text DEFAULT NULL
) RETURNS TABLE (created boolean, created_at timestamptz, tenant text, external_key text)
LANGUAGE plpgsql AS $$
DECLARE
    v_now timestamptz := coalesce(p_now, now());
    v_id  uuid;
    v_key text;
    a     approvals%ROWTYPE;
BEGIN
    -- ON CONFLICT waits for a concurrent inserter of the same key, so
    -- identical concurrent requests converge on one operation. It names
    -- no arbiter: the same (tenant, action, key) also gives the same
    -- derived external key (041), and with (tenant_id, action, key) as
    -- the only arbiter, two inserters that both passed its check met
    -- again in operations_external_key_idx, where the loser waited and
    -- then failed with unique_violation (a 500 to a concurrent replay)
    -- instead of doing nothing.
    INSERT INTO operations (id, tenant_id, action, key, provider, params, params_fingerprint,
        approval_id, requested_by, external_key, status, created_at, updated_at, client_key, scope, traceparent)
    VALUES (p_id, p_tenant, p_action, p_key, p_provider, p_params, p_fingerprint,
        p_approval, p_token, p_external_key, 'queued', v_now, v_now, p_client_key, p_scope, p_traceparent)
    ON CONFLICT DO NOTHING
    RETURNING id INTO v_id;
    IF v_id IS NULL THEN
        -- The key exists: a replay or a conflict, decided by the caller.
        RETURN QUERY SELECT false, NULL::timestamptz, NULL::text, NULL::text;
        RETURN;
    END IF;
    v_key := coalesce(key_tombstone_reuse(p_id, p_tenant, p_action, p_key, p_fingerprint, p_scope), p_external_key);

    -- The row lock makes concurrent consumers queue; each re-checks
    -- uses < max_uses on the newest row.
    UPDATE approvals SET uses = uses + 1
    WHERE id = p_approval AND tenant_id = p_tenant AND scope_admits(scope, p_scope) AND action = p_action
      AND params_fingerprint = p_fingerprint AND revoked_at IS NULL
      AND expires_at > v_now AND uses < max_uses
    RETURNING * INTO a;
    IF NOT FOUND THEN
        SELECT * INTO a FROM approvals WHERE id = p_approval AND tenant_id = p_tenant AND scope_admits(scope, p_scope);
        IF NOT FOUND THEN
            RAISE EXCEPTION USING ERRCODE = 'AL403', MESSAGE = 'approval_mismatch', DETAIL = 'no such approval';
        ELSIF a.revoked_at IS NOT NULL THEN
            RAISE EXCEPTION USING ERRCODE = 'AL403', MESSAGE = 'approval_revoked', DETAIL = 'the approval was revoked';
        ELSIF a.expires_at <= v_now THEN
            RAISE EXCEPTION USING ERRCODE = 'AL403', MESSAGE = 'approval_expired',
                DETAIL = 'the approval expired at ' || to_char(a.expires_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS"Z"');
        ELSIF a.action <> p_action THEN
            RAISE EXCEPTION USING ERRCODE = 'AL403', MESSAGE = 'approval_mismatch',
                DETAIL = format('the approval is for action %s', a.action);
        ELSIF a.params_fingerprint <> p_fingerprint THEN
            RAISE EXCEPTION USING ERRCODE = 'AL403', MESSAGE = 'approval_mismatch', DETAIL = 'params are not those approved';
        ELSE
            RAISE EXCEPTION USING ERRCODE = 'AL403', MESSAGE = 'approval_used',
                DETAIL = format('the approval''s %s use(s) are taken', a.max_uses);
        END IF;
    END IF;

    INSERT INTO operation_events (operation_id, tenant_id, at, kind, from_status, to_status, actor, detail)
    VALUES (p_id, p_tenant, v_now, 'created', NULL, 'queued', p_actor,
        jsonb_build_object('approval_id', p_approval, 'params_fingerprint', p_fingerprint));
    INSERT INTO outbox (subject, msg_id, payload, traceparent) VALUES (p_subject, p_msg_id, p_payload, p_traceparent);
    RETURN QUERY SELECT true, v_now, t.name, v_key FROM tenants t WHERE t.id = p_tenant;
END;
$$;
