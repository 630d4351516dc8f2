-- enqueue_operations: the enqueues of concurrent callers in one statement.
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
--
-- Its statements are planned with nested loops over index scans only (the
-- SET clauses): they touch a few rows of tables that grow without bound,
-- by primary key. A plan cached while a table was small would otherwise
-- stay cached while the table grows (transition_operations says more).
--
-- p_client_key holds each operation's client key, and p_scope each one's
-- access scope, as enqueue_operation's; an approval must admit the scope
-- of every operation of the group under it.
--
-- A key that retention pruned (a key tombstone, schema 041) is not clean
-- either: enqueue_operation's key_tombstone_reuse judges it. The check
-- runs after the insert, for the reason key_tombstone_reuse gives.
--
-- requires: scope_admits
CREATE OR REPLACE FUNCTION enqueue_operations(
    p_id uuid[], p_tenant uuid[], p_action text[], p_key text[], p_provider text[], p_params jsonb[],
    p_fingerprint text[], p_approval uuid[], p_token uuid[], p_external_key text[], p_now timestamptz,
    p_actor text[], p_subject text[], p_msg_id text[], p_payload bytea[], p_client_key text[] DEFAULT NULL,
    p_scope text[] DEFAULT NULL, p_traceparent text[] DEFAULT NULL
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
      AND a.expires_at > v_now AND a.uses + w.n <= a.max_uses
      AND NOT EXISTS (
          SELECT 1 FROM unnest(p_approval, p_scope) AS s(approval, scope)
          WHERE s.approval = a.id AND NOT scope_admits(a.scope, s.scope));
    GET DIAGNOSTICS v_rows = ROW_COUNT;
    SELECT count(*) INTO v_groups FROM (
        SELECT DISTINCT * FROM unnest(p_approval, p_tenant, p_action, p_fingerprint)) g;
    IF v_rows <> v_groups THEN
        RAISE EXCEPTION USING ERRCODE = 'ALSET', MESSAGE = 'an approval of the group refuses: enqueue one by one';
    END IF;

    -- ON CONFLICT waits for a concurrent inserter of the same key, as
    -- enqueue_operation does, with every unique index an arbiter for the
    -- same reason; a key that exists is not clean.
    INSERT INTO operations (id, tenant_id, action, key, provider, params, params_fingerprint,
        approval_id, requested_by, external_key, status, created_at, updated_at, client_key, scope, traceparent)
    SELECT r.id, r.tenant, r.action, r.key, r.provider, r.params, r.fingerprint,
        r.approval, r.token, r.external_key, 'queued', v_now, v_now, r.client_key, r.scope, r.traceparent
    FROM unnest(p_id, p_tenant, p_action, p_key, p_provider, p_params, p_fingerprint,
        p_approval, p_token, p_external_key, p_client_key, p_scope, p_traceparent)
        AS r(id, tenant, action, key, provider, params, fingerprint, approval, token, external_key, client_key, scope, traceparent)
    ON CONFLICT DO NOTHING;
    GET DIAGNOSTICS v_rows = ROW_COUNT;
    IF v_rows <> v_n THEN
        RAISE EXCEPTION USING ERRCODE = 'ALSET', MESSAGE = 'a key of the group exists: enqueue one by one';
    END IF;
    IF EXISTS (
        SELECT 1 FROM unnest(p_tenant, p_action, p_key) AS r(tenant, action, key)
        JOIN key_tombstones k ON k.tenant_id = r.tenant AND k.action = r.action AND k.key = r.key) THEN
        RAISE EXCEPTION USING ERRCODE = 'ALSET', MESSAGE = 'a key of the group was pruned: enqueue one by one';
    END IF;

    INSERT INTO operation_events (operation_id, tenant_id, at, kind, from_status, to_status, actor, detail)
    SELECT r.id, r.tenant, v_now, 'created', NULL, 'queued', r.actor,
        jsonb_build_object('approval_id', r.approval, 'params_fingerprint', r.fingerprint)
    FROM unnest(p_id, p_tenant, p_actor, p_approval, p_fingerprint) AS r(id, tenant, actor, approval, fingerprint);

    INSERT INTO outbox (subject, msg_id, payload, traceparent)
    SELECT * FROM unnest(p_subject, p_msg_id, p_payload, p_traceparent);

    RETURN QUERY
    SELECT r.ord, v_now, t.name
    FROM unnest(p_tenant) WITH ORDINALITY AS r(tenant, ord) JOIN tenants t ON t.id = r.tenant;
END;
$$;
