-- 016_set_based_writes: the writes of concurrent callers in one statement
-- each: enqueues (enqueue_operations) and operation transitions
-- (transition_operations).
--
-- Both functions plan their statements with nested loops over index scans
-- only (the SET clauses): they touch a few rows of tables that grow
-- without bound, by primary key. A plan cached while a table was small
-- (a hash join over a sequential scan of operations is cheapest for a few
-- hundred rows) would otherwise stay cached while the table grows: without
-- fresh statistics nothing replaces it, and every transition would read
-- the whole ledger.
--
-- Concurrent enqueues already share one transaction and one commit
-- (ledger.Store.Enqueue groups them); each still ran its own
-- enqueue_operation call, four statements through plpgsql per operation.
-- enqueue_operations does the same work for a whole group with one
-- statement per table: the approvals' uses, the operations, their created
-- events and their dispatch messages.
--
-- It only takes the clean case: every operation new, every approval
-- standing with uses left for all of the group's operations under it. In
-- any other case (a replayed or conflicting key, a key twice in the group,
-- an approval that refuses) it raises SQLSTATE ALSET, the group's shared
-- transaction rolls back, and each enqueue runs again alone through
-- enqueue_operation, which decides every case and is the rules' only
-- implementation. So this function never answers for an operation
-- differently from enqueue_operation: it answers only when every
-- enqueue_operation call would have created its operation.
CREATE FUNCTION enqueue_operations(
    p_id uuid[], p_tenant uuid[], p_action text[], p_key text[], p_provider text[], p_params jsonb[],
    p_fingerprint text[], p_approval uuid[], p_token uuid[], p_external_key text[], p_now timestamptz,
    p_actor text[], p_subject text[], p_msg_id text[], p_payload bytea[]
) RETURNS TABLE (ord bigint, created_at timestamptz, tenant text)
LANGUAGE plpgsql
SET enable_seqscan = off SET enable_hashjoin = off SET enable_mergejoin = off
SET plan_cache_mode = force_generic_plan
AS $$
DECLARE
    v_now    timestamptz := coalesce(p_now, now());
    v_n      integer := cardinality(p_id);
    v_groups integer;
    v_rows   integer;
BEGIN
    -- Lock the approvals in id order, so two groups that share approvals
    -- take their locks in the same order and never deadlock.
    PERFORM 1 FROM approvals WHERE id = ANY (p_approval) ORDER BY id FOR UPDATE;

    -- One use per operation, all of an approval's uses at once: an
    -- approval without enough uses left for the group is not clean.
    WITH want AS (
        SELECT r.approval, r.tenant, r.action, r.fingerprint, count(*) AS n
        FROM unnest(p_approval, p_tenant, p_action, p_fingerprint) AS r(approval, tenant, action, fingerprint)
        GROUP BY 1, 2, 3, 4
    )
    UPDATE approvals a SET uses = a.uses + w.n
    FROM want w
    WHERE a.id = w.approval AND a.tenant_id = w.tenant AND a.action = w.action
      AND a.params_fingerprint = w.fingerprint AND a.revoked_at IS NULL
      AND a.expires_at > v_now AND a.uses + w.n <= a.max_uses;
    GET DIAGNOSTICS v_rows = ROW_COUNT;
    SELECT count(*) INTO v_groups FROM (
        SELECT DISTINCT * FROM unnest(p_approval, p_tenant, p_action, p_fingerprint)) g;
    IF v_rows <> v_groups THEN
        RAISE EXCEPTION USING ERRCODE = 'ALSET', MESSAGE = 'an approval of the group refuses: enqueue one by one';
    END IF;

    -- ON CONFLICT waits for a concurrent inserter of the same key, as
    -- enqueue_operation does; a key that exists is not clean.
    INSERT INTO operations (id, tenant_id, action, key, provider, params, params_fingerprint,
        approval_id, requested_by, external_key, status, created_at, updated_at)
    SELECT r.id, r.tenant, r.action, r.key, r.provider, r.params, r.fingerprint,
        r.approval, r.token, r.external_key, 'queued', v_now, v_now
    FROM unnest(p_id, p_tenant, p_action, p_key, p_provider, p_params, p_fingerprint,
        p_approval, p_token, p_external_key)
        AS r(id, tenant, action, key, provider, params, fingerprint, approval, token, external_key)
    ON CONFLICT (tenant_id, action, key) DO NOTHING;
    GET DIAGNOSTICS v_rows = ROW_COUNT;
    IF v_rows <> v_n THEN
        RAISE EXCEPTION USING ERRCODE = 'ALSET', MESSAGE = 'a key of the group exists: enqueue one by one';
    END IF;

    INSERT INTO operation_events (operation_id, tenant_id, at, kind, from_status, to_status, actor, detail)
    SELECT r.id, r.tenant, v_now, 'created', NULL, 'queued', r.actor,
        jsonb_build_object('approval_id', r.approval, 'params_fingerprint', r.fingerprint)
    FROM unnest(p_id, p_tenant, p_actor, p_approval, p_fingerprint) AS r(id, tenant, actor, approval, fingerprint);

    INSERT INTO outbox (subject, msg_id, payload)
    SELECT * FROM unnest(p_subject, p_msg_id, p_payload);

    RETURN QUERY
    SELECT r.ord, v_now, t.name
    FROM unnest(p_tenant) WITH ORDINALITY AS r(tenant, ord) JOIN tenants t ON t.id = r.tenant;
END;
$$;

-- operation_lapse says why an approved operation may no longer be sent
-- at p_at, given its approval a and its requesting token k: its approval
-- revoked or expired, granted for another provider target than
-- (p_account, p_environment) (a NULL p_account skips that comparison, and
-- so does an approval older than the binding, whose account is NULL), or
-- its token revoked; '' when it may be sent. It is the rule's only
-- statement: the claim (transition_operations), the confirmation before
-- every call and the ledger's reads all ask it. A plain SQL function, so
-- the planner inlines it into each query.
CREATE FUNCTION operation_lapse(a approvals, k api_tokens, p_at timestamptz, p_account text, p_environment text)
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

-- transition_operations applies a set of changes of operations, one per
-- element of its arrays; ledger/transition.go documents the rules and is
-- their only caller (operationTransitions). Each change is a conditional
-- update on the operation's version and status that appends its event;
-- a change that does not apply returns no row. ord is a change's 1-based
-- position in the arrays; lapse, for a claim (p_check_lapse), says whether
-- the claimed operation may still be sent to the claim's target.
CREATE FUNCTION transition_operations(
    p_id uuid[], p_version bigint[], p_from text[], p_to text[],
    p_lease_owner text[], p_lease_until timestamptz[], p_lease_for_us bigint[],
    p_only_if_lease_expired boolean[], p_unless_paused boolean[],
    p_next_attempt_at timestamptz[], p_attempted boolean[], p_sent_at timestamptz[], p_sent_from timestamptz[],
    p_provider_reference text[], p_flag text[],
    p_review_reason text[], p_review_owner text[], p_review_deadline timestamptz[],
    p_reset_retry_budget boolean[], p_kind text[], p_actor text[], p_detail jsonb[],
    p_approval_id uuid[], p_decision_reason text[],
    p_check_lapse boolean[], p_account text[], p_environment text[],
    p_now timestamptz, p_review_subject text
) RETURNS TABLE (
    id uuid, tenant_id uuid, tenant text, action text, key text, provider text, params jsonb,
    params_fingerprint text, approval_id uuid, requested_by uuid, external_key text, status text, version bigint,
    attempts integer, retry_base integer, retry_since timestamptz, lease_owner text, lease_expires_at timestamptz,
    next_attempt_at timestamptz, first_sent_at timestamptz, last_sent_at timestamptz, provider_reference text,
    review_reason text, review_owner text, review_deadline timestamptz, flags text[], created_at timestamptz,
    updated_at timestamptz, request_reason text, request_expires_at timestamptz, decision_reason text,
    ord bigint, lapse text
)
LANGUAGE plpgsql
SET enable_seqscan = off SET enable_hashjoin = off SET enable_mergejoin = off
SET plan_cache_mode = force_generic_plan
AS $$
#variable_conflict use_column
DECLARE
    v_now timestamptz := coalesce(p_now, now());
BEGIN
    RETURN QUERY
    WITH c AS (
        SELECT * FROM unnest(
            p_id, p_version, p_from, p_to,
            p_lease_owner, p_lease_until, p_lease_for_us,
            p_only_if_lease_expired, p_unless_paused,
            p_next_attempt_at, p_attempted, p_sent_at, p_sent_from,
            p_provider_reference, p_flag,
            p_review_reason, p_review_owner, p_review_deadline,
            p_reset_retry_budget, p_kind, p_actor, p_detail,
            p_approval_id, p_decision_reason,
            p_check_lapse, p_account, p_environment
        ) WITH ORDINALITY AS c(id, version, from_status, to_status,
            lease_owner, lease_until, lease_for_us,
            only_if_lease_expired, unless_paused,
            next_attempt_at, attempted, sent_at, sent_from,
            provider_reference, flag,
            review_reason, review_owner, review_deadline,
            reset_retry_budget, kind, actor, detail,
            approval_id, decision_reason,
            check_lapse, account, environment, ord)
    ), upd AS (
        UPDATE operations o SET
            status             = c.to_status,
            version            = o.version + 1,
            updated_at         = v_now,
            lease_owner        = CASE WHEN c.to_status = 'dispatching' THEN c.lease_owner END,
            lease_expires_at   = CASE WHEN c.to_status = 'dispatching'
                                      THEN coalesce(c.lease_until, v_now + c.lease_for_us * interval '1 microsecond') END,
            next_attempt_at    = c.next_attempt_at,
            attempts           = o.attempts + CASE WHEN c.attempted THEN 1 ELSE 0 END,
            first_sent_at      = coalesce(o.first_sent_at, CASE WHEN c.sent_at IS NOT NULL THEN coalesce(c.sent_from, c.sent_at) END),
            last_sent_at       = coalesce(c.sent_at, o.last_sent_at),
            provider_reference = coalesce(c.provider_reference, o.provider_reference),
            review_reason      = CASE WHEN c.to_status = 'review' THEN c.review_reason END,
            review_owner       = CASE WHEN c.to_status = 'review' THEN c.review_owner END,
            review_deadline    = CASE WHEN c.to_status = 'review' THEN c.review_deadline END,
            retry_base         = CASE WHEN c.reset_retry_budget THEN o.attempts ELSE o.retry_base END,
            retry_since        = CASE WHEN c.reset_retry_budget THEN v_now ELSE o.retry_since END,
            flags              = CASE WHEN c.flag IS NULL OR c.flag = ANY (o.flags) THEN o.flags ELSE o.flags || c.flag END,
            approval_id        = coalesce(c.approval_id, o.approval_id),
            decision_reason    = coalesce(c.decision_reason, o.decision_reason)
        FROM c
        WHERE o.id = c.id AND o.version = c.version AND o.status = c.from_status
          AND NOT (c.only_if_lease_expired AND o.lease_expires_at >= v_now)
          AND NOT (c.unless_paused AND EXISTS (
              SELECT 1 FROM dispatch_pauses p
              WHERE p.tenant_id = o.tenant_id
                AND (p.provider IS NULL OR p.provider = o.provider)
                AND (p.action IS NULL OR p.action = o.action)))
        RETURNING o.*, c.ord AS c_ord, c.from_status AS c_from, c.kind AS c_kind, c.actor AS c_actor, c.detail AS c_detail,
                  c.check_lapse AS c_check_lapse, c.account AS c_account, c.environment AS c_environment
    ), ev AS (
        INSERT INTO operation_events (operation_id, tenant_id, at, kind, from_status, to_status, actor, detail)
        SELECT id, tenant_id, updated_at, c_kind, c_from, status, c_actor, c_detail FROM upd ORDER BY c_ord
    ), review AS (
        -- Every review item is also announced on the review stream, through the
        -- outbox, in this same statement.
        INSERT INTO outbox (subject, msg_id, payload)
        SELECT p_review_subject || '.' || u.tenant_id::text || '.' || u.review_reason,
               'review.' || u.id || '.' || u.version,
               convert_to(json_build_object(
                   'operation_id', u.id, 'tenant', t.name, 'action', u.action, 'key', u.key,
                   'provider', u.provider, 'reason', u.review_reason, 'owner', u.review_owner,
                   'deadline', u.review_deadline, 'version', u.version, 'at', u.updated_at)::text, 'UTF8')
        FROM upd u JOIN tenants t ON t.id = u.tenant_id
        WHERE u.status = 'review' AND p_review_subject <> ''
    )
    SELECT o.id, o.tenant_id, t.name, o.action, o.key, o.provider, o.params,
        o.params_fingerprint, o.approval_id, o.requested_by, o.external_key, o.status, o.version,
        o.attempts, o.retry_base, o.retry_since, o.lease_owner, o.lease_expires_at, o.next_attempt_at, o.first_sent_at,
        o.last_sent_at, o.provider_reference, o.review_reason, o.review_owner, o.review_deadline,
        o.flags, o.created_at, o.updated_at, o.request_reason, o.request_expires_at, o.decision_reason, o.c_ord AS ord,
        CASE WHEN o.c_check_lapse THEN operation_lapse(a, k, v_now, o.c_account, o.c_environment) ELSE '' END AS lapse
    FROM upd o JOIN tenants t ON t.id = o.tenant_id
    LEFT JOIN approvals a ON a.id = o.approval_id AND o.c_check_lapse
    LEFT JOIN api_tokens k ON k.id = o.requested_by AND o.c_check_lapse;
END;
$$;

-- The statement triggers of schema 015 run a statement or two per write:
-- planned once, not once per write.
ALTER FUNCTION operation_counts_track() SET plan_cache_mode = force_generic_plan;
ALTER FUNCTION operation_changed() SET plan_cache_mode = force_generic_plan;
