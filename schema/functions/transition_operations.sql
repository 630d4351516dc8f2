-- transition_operations: the transitions of concurrent callers in one
-- statement.
--
-- transition_operations applies a set of changes of operations, one per
-- element of its arrays; ledger/transition.go documents the rules and is
-- their only caller (operationTransitions). Each change is a conditional
-- update on the operation's version and status that appends its event;
-- a change that does not apply returns no row. ord is a change's 1-based
-- position in the arrays; lapse, for a claim (p_check_lapse), says whether
-- the claimed operation may still be sent to the claim's target
-- (operation_lapse).
--
-- A change may name the provider of the operation it applies to
-- (p_provider). The dispatcher claims a new operation (version 1) straight
-- from its dispatch message, without reading the row first. A claim
-- records the account and environment of the provider whose consumer took
-- the message and judges the approval against them; the message alone does
-- not say whose the operation is (it is a pointer, and anyone who can
-- publish to the stream can put it on another provider's subject). With
-- p_provider the claim of another provider's operation does not apply,
-- writes nothing, and the dispatcher reads the row and drops the message.
--
-- requires: operation_lapse
--
-- A change that settles an operation or opens a review item also writes
-- its notification and the notification's outbox row, in the same
-- statement, when a receiver of the operation's tenant subscribes to that
-- event (schema 028; ledger/notification.go says more).
--
-- Its statements are planned with nested loops over index scans only (the
-- SET clauses): they touch a few rows of tables that grow without bound,
-- by primary key. A plan cached while a table was small (a hash join over
-- a sequential scan of operations is cheapest for a few hundred rows)
-- would otherwise stay cached while the table grows: without fresh
-- statistics nothing replaces it, and every transition would read the
-- whole ledger.
--
-- A review announcement carries its operation's trace context (schema
-- 030), as every outbox row about an operation does.
CREATE OR REPLACE FUNCTION transition_operations(
    p_id uuid[], p_version bigint[], p_from text[], p_to text[],
    p_lease_owner text[], p_lease_until timestamptz[], p_lease_for_us bigint[],
    p_only_if_lease_expired boolean[], p_unless_paused boolean[],
    p_next_attempt_at timestamptz[], p_attempted boolean[], p_sent_at timestamptz[], p_sent_from timestamptz[],
    p_provider_reference text[], p_flag text[],
    p_review_reason text[], p_review_owner text[], p_review_deadline timestamptz[],
    p_reset_retry_budget boolean[], p_kind text[], p_actor text[], p_detail jsonb[],
    p_approval_id uuid[], p_decision_reason text[],
    p_check_lapse boolean[], p_account text[], p_environment text[],
    p_provider text[],
    p_now timestamptz, p_review_subject text
) RETURNS TABLE (
    id uuid, tenant_id uuid, tenant text, action text, key text, provider text, params jsonb,
    params_fingerprint text, approval_id uuid, requested_by uuid, external_key text, status text, version bigint,
    attempts integer, retry_base integer, retry_since timestamptz, lease_owner text, lease_expires_at timestamptz,
    next_attempt_at timestamptz, first_sent_at timestamptz, last_sent_at timestamptz, provider_reference text,
    review_reason text, review_owner text, review_deadline timestamptz, flags text[], created_at timestamptz,
    updated_at timestamptz, request_reason text, request_expires_at timestamptz, decision_reason text,
    client_key text, scope text, traceparent text, ord bigint, lapse text
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
            p_check_lapse, p_account, p_environment,
            p_provider
        ) WITH ORDINALITY AS c(id, version, from_status, to_status,
            lease_owner, lease_until, lease_for_us,
            only_if_lease_expired, unless_paused,
            next_attempt_at, attempted, sent_at, sent_from,
            provider_reference, flag,
            review_reason, review_owner, review_deadline,
            reset_retry_budget, kind, actor, detail,
            approval_id, decision_reason,
            check_lapse, account, environment,
            provider, ord)
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
          AND (c.provider IS NULL OR o.provider = c.provider)
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
        INSERT INTO outbox (subject, msg_id, payload, traceparent)
        SELECT p_review_subject || '.' || u.tenant_id::text || '.' || u.review_reason,
               'review.' || u.id || '.' || u.version,
               convert_to(json_build_object(
                   'operation_id', u.id, 'tenant', t.name, 'action', u.action, 'key', u.key,
                   'provider', u.provider, 'reason', u.review_reason, 'owner', u.review_owner,
                   'deadline', u.review_deadline, 'version', u.version, 'at', u.updated_at)::text, 'UTF8'),
               u.traceparent
        FROM upd u JOIN tenants t ON t.id = u.tenant_id
        WHERE u.status = 'review' AND p_review_subject <> ''
    ), note AS (
        -- An operation that settles (succeeded, failed, cancelled, held) or
        -- enters review is notified, in this same statement, when a
        -- receiver of its tenant subscribes to the event
        -- (notification_receivers, schema 028); without one nothing is
        -- written.
        INSERT INTO notifications (id, tenant_id, type, operation_id, status, at)
        SELECT gen_random_uuid(), u.tenant_id, e.type, u.id, u.status, u.updated_at
        FROM upd u
        CROSS JOIN LATERAL (SELECT CASE
            WHEN u.status = 'review' THEN 'review.opened'
            WHEN u.status IN ('succeeded', 'failed', 'cancelled', 'held') THEN 'operation.settled'
        END AS type) e
        WHERE e.type IS NOT NULL
          AND EXISTS (SELECT 1 FROM notification_receivers r WHERE r.tenant_id = u.tenant_id AND e.type = ANY (r.events))
        RETURNING notifications.id, notifications.tenant_id, notifications.type
    ), note_out AS (
        INSERT INTO outbox (subject, msg_id, payload)
        SELECT (SELECT min(r.subject) FROM notification_receivers r WHERE r.tenant_id = n.tenant_id) || '.' || n.type,
               n.id::text, convert_to(json_build_object('notification_id', n.id)::text, 'UTF8')
        FROM note n
    )
    SELECT o.id, o.tenant_id, t.name, o.action, o.key, o.provider, o.params,
        o.params_fingerprint, o.approval_id, o.requested_by, o.external_key, o.status, o.version,
        o.attempts, o.retry_base, o.retry_since, o.lease_owner, o.lease_expires_at, o.next_attempt_at, o.first_sent_at,
        o.last_sent_at, o.provider_reference, o.review_reason, o.review_owner, o.review_deadline,
        o.flags, o.created_at, o.updated_at, o.request_reason, o.request_expires_at, o.decision_reason, o.client_key,
        o.scope, o.traceparent, o.c_ord AS ord,
        CASE WHEN o.c_check_lapse THEN operation_lapse(a, k, v_now, o.c_account, o.c_environment) ELSE '' END AS lapse
    FROM upd o JOIN tenants t ON t.id = o.tenant_id
    LEFT JOIN approvals a ON a.id = o.approval_id AND o.c_check_lapse
    LEFT JOIN api_tokens k ON k.id = o.requested_by AND o.c_check_lapse;
END;
$$;
