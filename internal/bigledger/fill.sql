-- fill.sql: a ledger that has run for a while, written set-based (one
-- INSERT … SELECT generate_series per table) into a freshly migrated
-- database, in one transaction. Every CHECK, NOT NULL and unique index of
-- the schema holds each row as it is written. The foreign keys of
-- operations and operation_events are not checked row by row (a million
-- lookups that took two thirds of the fill's time): those two inserts run
-- with session_replication_role = replica, which fires no trigger, and one
-- set-based check at the end proves every key they wrote refers to a row
-- (or fails the fill). The operation counts their statement trigger would
-- have appended are written as schema 011 wrote them, from the table.
--
-- 200,000 operations of four tenants of unequal size (55 %, 25 %, 15 %,
-- 5 %), one every 30 s for the last 69 days. 97 % are terminal
-- (succeeded, failed, cancelled); the other 3 % are spread over every
-- open state, at every age: queued, retry_wait, unknown, dispatching,
-- review (1,600 items), awaiting_approval (1,200 proposals, half of them
-- past their request_ttl) and held. About four events per operation,
-- 2,000 approvals, 100,000 published outbox rows and a few unpublished
-- ones, 50,000 applied webhook events and a few unapplied ones, stale
-- results and unmatched evidence, and one dispatch pause.
--
-- Every id is derived from its row's number, so two fills are alike row
-- for row; an operation's id is a UUIDv7 of its creation time, as
-- ledger.Enqueue makes them (uuid.NewV7), so the primary key grows at its
-- end as it does in production.

-- A test database is dropped after its test: its commit need not wait
-- for the disk.
SET LOCAL synchronous_commit = off;

INSERT INTO tenants (id, name, created_at)
SELECT md5('tenant' || t)::uuid, 'big-' || t, now() - interval '400 days'
FROM generate_series(0, 3) t;

INSERT INTO api_tokens (id, tenant_id, name, role, token_hash, created_at)
SELECT md5('token' || t || r)::uuid, md5('tenant' || t)::uuid, 'big-' || t || '-' || r, r,
       decode(md5('hash' || t || r), 'hex'), now() - interval '400 days'
FROM generate_series(0, 3) t, unnest(ARRAY['agent', 'approver']) r;

-- Approval a covers operations 100a … 100a+99, all of its tenant. One in
-- fifty has expired since.
CREATE TEMP TABLE big_approvals AS
SELECT a, md5('approval' || a)::uuid AS id,
       CASE WHEN a % 20 < 11 THEN 0 WHEN a % 20 < 16 THEN 1 WHEN a % 20 < 19 THEN 2 ELSE 3 END AS t
FROM generate_series(0, 1999) a;

INSERT INTO approvals (id, tenant_id, action, params, params_fingerprint, policy_version,
    approver_token_id, expires_at, max_uses, uses, created_at, account, environment)
SELECT id, md5('tenant' || t)::uuid, 'order.create', '{}', md5('params' || a), 'v1',
       md5('token' || t || 'approver')::uuid,
       CASE WHEN a % 50 = 0 THEN now() - interval '1 day' ELSE now() + interval '30 days' END,
       1000, 100, now() - (200000 - 100 * a) * interval '30 seconds', 'acct', 'live'
FROM big_approvals;

-- r spreads the states evenly over time (7919 is prime to 1000): per
-- thousand operations 900 succeeded, 45 failed, 25 cancelled, 5 queued,
-- 3 retry_wait, 2 unknown, 4 dispatching, 8 review, 6 awaiting_approval
-- and 2 held.
CREATE TEMP TABLE big_ops AS
SELECT g, (lpad(to_hex((extract(epoch FROM c.at) * 1000)::bigint), 12, '0') || '7000' || '8000'
           || substr(md5('op' || g), 1, 12))::uuid AS id,
       md5('tenant' || b.t)::uuid AS tenant_id, b.id AS approval_id,
       md5('token' || b.t || 'agent')::uuid AS requested_by,
       c.at AS created_at,
       CASE
           WHEN r < 900 THEN 'succeeded'
           WHEN r < 945 THEN 'failed'
           WHEN r < 970 THEN 'cancelled'
           WHEN r < 975 THEN 'queued'
           WHEN r < 978 THEN 'retry_wait'
           WHEN r < 980 THEN 'unknown'
           WHEN r < 984 THEN 'dispatching'
           WHEN r < 992 THEN 'review'
           WHEN r < 998 THEN 'awaiting_approval'
           ELSE 'held'
       END AS status
FROM generate_series(0, 199999) g
CROSS JOIN LATERAL (SELECT (g::bigint * 7919) % 1000 AS r, now() - (200000 - g) * interval '30 seconds' AS at) c
JOIN big_approvals b ON b.a = g / 100;

SET LOCAL session_replication_role = replica;

INSERT INTO operations (id, tenant_id, action, key, provider, params, params_fingerprint,
    approval_id, requested_by, external_key, status, version, attempts,
    lease_owner, lease_expires_at, next_attempt_at, first_sent_at, last_sent_at, provider_reference,
    review_reason, review_owner, review_deadline, flags, created_at, updated_at,
    request_reason, request_expires_at)
SELECT id, tenant_id, 'order.create', 'k' || g, 'mock', jsonb_build_object('sku', 'sku-' || g % 97, 'qty', g % 7 + 1),
       md5('params' || g / 100),
       CASE WHEN status = 'awaiting_approval' THEN NULL ELSE approval_id END,
       requested_by, 'al_' || id::text, status,
       CASE WHEN status IN ('queued', 'awaiting_approval') THEN 1 ELSE 4 END,
       CASE WHEN status IN ('queued', 'awaiting_approval', 'cancelled') THEN 0 ELSE 1 END,
       CASE WHEN status = 'dispatching' THEN 'worker-' || g % 8 END,
       -- Half the leases have expired (their workers stopped), half run.
       CASE WHEN status = 'dispatching' THEN now() + CASE WHEN g % 2 = 0 THEN interval '-1 minute' ELSE interval '1 minute' END END,
       CASE WHEN status IN ('retry_wait', 'unknown') THEN created_at + interval '5 minutes' END,
       CASE WHEN status NOT IN ('queued', 'awaiting_approval', 'cancelled') THEN created_at + interval '1 second' END,
       CASE WHEN status NOT IN ('queued', 'awaiting_approval', 'cancelled') THEN created_at + interval '1 second' END,
       CASE WHEN status = 'succeeded' THEN 'ord_' || g END,
       CASE WHEN status = 'review' THEN 'outcome_unknown' END,
       CASE WHEN status = 'review' THEN 'ops' END,
       CASE WHEN status = 'review' THEN created_at + interval '1 day' END,
       CASE WHEN status = 'held' THEN ARRAY['approval_revoked'] ELSE '{}' END,
       created_at,
       created_at + CASE WHEN status = 'queued' THEN interval '0' ELSE interval '2 seconds' END,
       CASE WHEN status = 'awaiting_approval' OR g % 20 = 0 THEN 'restock' END,
       CASE WHEN status = 'awaiting_approval' OR g % 20 = 0 THEN
           CASE WHEN g % 2 = 0 THEN now() - interval '1 hour' ELSE now() + interval '1 hour' END END
FROM big_ops;

-- created, claimed and attempt (both naming the target they were
-- configured for), then the outcome; a third of the successes also have
-- their webhook's evidence.
INSERT INTO operation_events (operation_id, tenant_id, at, kind, from_status, to_status, actor, detail)
SELECT o.id, o.tenant_id, o.created_at + k * interval '100 milliseconds',
       (ARRAY['created', 'claimed', 'attempt', o.status, 'evidence'])[k],
       (ARRAY[NULL, 'queued', 'dispatching', 'dispatching', o.status])[k],
       (ARRAY[CASE WHEN o.status = 'awaiting_approval' THEN 'awaiting_approval' ELSE 'queued' END,
              'dispatching', 'dispatching', o.status, o.status])[k],
       (ARRAY['token:agent', 'worker-1', 'worker-1', 'worker-1', 'reconciler'])[k],
       CASE WHEN k IN (2, 3) THEN '{"account": "acct", "environment": "live"}'::jsonb ELSE '{}' END
FROM big_ops o
CROSS JOIN LATERAL generate_series(1, CASE
    WHEN o.status IN ('queued', 'awaiting_approval') THEN 1
    WHEN o.status IN ('dispatching', 'cancelled') THEN 2
    WHEN o.status = 'succeeded' AND o.g % 3 = 0 THEN 5
    ELSE 4 END) k;

SET LOCAL session_replication_role = origin;

INSERT INTO operation_counts (tenant_id, scope, status, n)
SELECT tenant_id, scope, status, count(*) FROM operations GROUP BY tenant_id, scope, status;

-- The foreign keys the two inserts above did not check.
DO $$
BEGIN
    IF EXISTS (SELECT 1 FROM operations o WHERE NOT EXISTS (SELECT 1 FROM tenants t WHERE t.id = o.tenant_id))
       OR EXISTS (SELECT 1 FROM operations o WHERE NOT EXISTS (SELECT 1 FROM api_tokens k WHERE k.id = o.requested_by))
       OR EXISTS (SELECT 1 FROM operations o
                  WHERE o.approval_id IS NOT NULL AND NOT EXISTS (SELECT 1 FROM approvals a WHERE a.id = o.approval_id))
       OR EXISTS (SELECT 1 FROM operation_events e WHERE NOT EXISTS (SELECT 1 FROM operations o WHERE o.id = e.operation_id))
       OR EXISTS (SELECT 1 FROM operation_events e WHERE NOT EXISTS (SELECT 1 FROM tenants t WHERE t.id = e.tenant_id)) THEN
        RAISE EXCEPTION 'bigledger fill: a foreign key of operations or operation_events refers to no row';
    END IF;
END;
$$;

-- The relay keeps published rows for a day and deletes them after: the
-- last 100,000 operations' dispatch messages. Half the queued operations'
-- messages wait to be published; the retries wait for their time.
INSERT INTO outbox (subject, msg_id, payload, created_at, published_at)
SELECT 'TEST.dispatch.mock', 'dispatch.' || id || '.1', convert_to('{"operation_id":"' || id || '"}', 'UTF8'),
       created_at, created_at + interval '10 milliseconds'
FROM big_ops WHERE g >= 100000
ORDER BY g;

INSERT INTO outbox (subject, msg_id, payload, created_at, deliver_after)
SELECT 'TEST.dispatch.mock', 'dispatch.' || id || '.' || CASE WHEN status = 'queued' THEN 1 ELSE 4 END,
       convert_to('{"operation_id":"' || id || '"}', 'UTF8'), created_at,
       CASE WHEN status = 'retry_wait' THEN now() + interval '1 minute' END
FROM big_ops WHERE (status = 'queued' AND g % 2 = 0) OR status = 'retry_wait'
ORDER BY g;

-- Webhooks of a quarter of the successes, all applied but the last
-- forty (half of which waited long enough for the evidence sweep).
INSERT INTO webhook_events (provider, event_id, type, reference, provider_reference, status, payload,
    received_at, applied_at, outcome)
SELECT 'mock', 'evt_' || g, 'order.completed', 'al_' || id, 'ord_' || g, 'succeeded', '{}',
       created_at + interval '3 seconds',
       CASE WHEN g < 199000 THEN created_at + interval '3 seconds' END,
       CASE WHEN g < 199000 THEN 'settled_succeeded' END
FROM big_ops WHERE status = 'succeeded' AND (g % 4 = 0 OR g >= 199000)
ORDER BY g;

INSERT INTO stale_results (operation_id, provider, provider_reference, worker, recorded_at, applied_at, outcome)
SELECT id, 'mock', 'ord_' || g, 'worker-1', created_at + interval '4 seconds',
       CASE WHEN g < 190000 THEN created_at + interval '4 seconds' END,
       CASE WHEN g < 190000 THEN 'settled_succeeded' END
FROM big_ops WHERE status = 'succeeded' AND g % 500 = 0;

INSERT INTO unmatched_evidence (tenant_id, provider, source, reference, status, owner, deadline, created_at, resolved_at)
SELECT md5('tenant' || u % 4)::uuid, 'mock', 'webhook:evt_unmatched_' || u, 'al_unknown_' || u, 'succeeded', 'ops',
       now() + interval '1 day', now() - (200 - u) * interval '1 hour',
       CASE WHEN u % 2 = 0 THEN now() - (200 - u) * interval '1 hour' + interval '1 minute' END
FROM generate_series(0, 199) u;

INSERT INTO dispatch_pauses (tenant_id, provider, action, paused_by)
VALUES (md5('tenant3')::uuid, 'mock', NULL, 'operator');
