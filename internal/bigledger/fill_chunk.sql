-- fill_chunk.sql: one range of the operations of a ledger that has run
-- for a while, written set-based (one INSERT … SELECT generate_series per
-- table) in one transaction. bigledger.Fill runs fill_begin.sql, then
-- this file once per range (several at a time), then fill_end.sql, into a
-- freshly migrated database. The settings it reads, set by the caller:
--   bigledger.operations   N, the operations of the whole fill;
--   bigledger.first/last   the range of operation numbers [first, last);
--   bigledger.subject      the subject of the dispatch messages.
--
-- Every CHECK, NOT NULL and unique index of the schema holds each row as
-- it is written. The foreign keys of operations and operation_events are
-- not checked row by row (a million lookups that took two thirds of the
-- fill's time): those two inserts run with session_replication_role =
-- replica, which fires no trigger, and one set-based check of the range
-- proves every key they wrote refers to a row (or fails the fill). The
-- operation counts their statement trigger would have appended are added
-- to operation_counts from the range.
--
-- N operations of four tenants of unequal size (55 %, 25 %, 15 %, 5 %),
-- evenly over the last 69 days. 97 % are terminal (succeeded, failed,
-- cancelled); the other 3 % are spread over every open state, at every
-- age: queued, retry_wait, unknown, dispatching, review, awaiting_approval
-- (half of them past their request_ttl) and held. Review items and
-- proposals are a few thousand whatever N is (1,600 and 1,200 up to
-- 500,000 operations, 4,000 and 3,000 from a million on: the operations
-- that would have been more are successes). About four events per
-- operation, an approval per hundred operations, the last 100,000
-- operations' published outbox rows and a few unpublished ones, webhook
-- events of a quarter of the successes, all applied but the newest, stale
-- results and unmatched evidence, and one dispatch pause.
--
-- Every id is derived from its row's number, so two fills are alike row
-- for row; an operation's id is a UUIDv7 of its creation time, as
-- ledger.Enqueue makes them (uuid.NewV7), so the primary key grows at its
-- end as it does in production.

SET LOCAL synchronous_commit = off;

-- r spreads the states evenly over time (7919 is prime to 1000): per
-- thousand operations 900 succeeded, 45 failed, 25 cancelled, 5 queued,
-- 3 retry_wait, 2 unknown, 4 dispatching, 8 review, 6 awaiting_approval
-- and 2 held; above 500,000 operations only one thousand in every
-- N / 500,000 has its review items and proposals.
CREATE TEMP TABLE big_ops ON COMMIT DROP AS
SELECT g, (lpad(to_hex((extract(epoch FROM c.at) * 1000)::bigint), 12, '0') || '7000' || '8000'
           || substr(md5('op' || g), 1, 12))::uuid AS id,
       md5('tenant' || b.t)::uuid AS tenant_id, md5('approval' || g / 100)::uuid AS approval_id,
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
           WHEN r < 998 AND (g / 1000) % p.rare <> 0 THEN 'succeeded'
           WHEN r < 992 THEN 'review'
           WHEN r < 998 THEN 'awaiting_approval'
           ELSE 'held'
       END AS status
FROM (SELECT current_setting('bigledger.operations')::bigint AS n,
             greatest(1, current_setting('bigledger.operations')::bigint / 500000) AS rare) p
CROSS JOIN LATERAL generate_series(current_setting('bigledger.first')::bigint,
                                   current_setting('bigledger.last')::bigint - 1) g
CROSS JOIN LATERAL (SELECT (g * 7919) % 1000 AS r, now() - (p.n - g) * (interval '6000000 seconds' / p.n) AS at) c
CROSS JOIN LATERAL (SELECT CASE WHEN (g / 100) % 20 < 11 THEN 0 WHEN (g / 100) % 20 < 16 THEN 1
                                WHEN (g / 100) % 20 < 19 THEN 2 ELSE 3 END AS t) b;

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

-- The foreign keys the two inserts above did not check: the events name
-- the range's operations by construction; the operations name tenants,
-- tokens and approvals fill_begin.sql wrote.
DO $$
BEGIN
    IF EXISTS (SELECT 1 FROM big_ops o WHERE NOT EXISTS (SELECT 1 FROM tenants t WHERE t.id = o.tenant_id))
       OR EXISTS (SELECT 1 FROM big_ops o WHERE NOT EXISTS (SELECT 1 FROM api_tokens k WHERE k.id = o.requested_by))
       OR EXISTS (SELECT 1 FROM big_ops o WHERE NOT EXISTS (SELECT 1 FROM approvals a WHERE a.id = o.approval_id)) THEN
        RAISE EXCEPTION 'bigledger fill: a foreign key of operations or operation_events refers to no row';
    END IF;
END;
$$;

-- The relay keeps published rows for a day and deletes them after: the
-- last 100,000 operations' dispatch messages. Half the newest 200,000
-- queued operations' messages wait to be published; their retries wait
-- for their time.
INSERT INTO outbox (subject, msg_id, payload, created_at, published_at)
SELECT current_setting('bigledger.subject'), 'dispatch.' || id || '.1', convert_to('{"operation_id":"' || id || '"}', 'UTF8'),
       created_at, created_at + interval '10 milliseconds'
FROM big_ops WHERE g >= current_setting('bigledger.operations')::bigint - 100000
ORDER BY g;

INSERT INTO outbox (subject, msg_id, payload, created_at, deliver_after)
SELECT current_setting('bigledger.subject'), 'dispatch.' || id || '.' || CASE WHEN status = 'queued' THEN 1 ELSE 4 END,
       convert_to('{"operation_id":"' || id || '"}', 'UTF8'), created_at,
       CASE WHEN status = 'retry_wait' THEN now() + interval '1 minute' END
FROM big_ops
WHERE ((status = 'queued' AND g % 2 = 0) OR status = 'retry_wait')
  AND g >= current_setting('bigledger.operations')::bigint - 200000
ORDER BY g;

-- Webhooks of a quarter of the successes and of every one of the newest
-- thousand operations; those newest are not applied yet.
INSERT INTO webhook_events (provider, event_id, type, reference, provider_reference, status, payload,
    received_at, applied_at, outcome)
SELECT 'mock', 'evt_' || g, 'order.completed', 'al_' || id, 'ord_' || g, 'succeeded', '{}',
       created_at + interval '3 seconds',
       CASE WHEN NOT newest THEN created_at + interval '3 seconds' END,
       CASE WHEN NOT newest THEN 'settled_succeeded' END
FROM big_ops
CROSS JOIN LATERAL (SELECT g >= current_setting('bigledger.operations')::bigint - 1000 AS newest) w
WHERE status = 'succeeded' AND (g % 4 = 0 OR newest)
ORDER BY g;

INSERT INTO stale_results (operation_id, provider, provider_reference, worker, recorded_at, applied_at, outcome)
SELECT id, 'mock', 'ord_' || g, 'worker-1', created_at + interval '4 seconds',
       CASE WHEN NOT newest THEN created_at + interval '4 seconds' END,
       CASE WHEN NOT newest THEN 'settled_succeeded' END
FROM big_ops
CROSS JOIN LATERAL (SELECT g >= current_setting('bigledger.operations')::bigint - 10000 AS newest) w
WHERE status = 'succeeded' AND g % 500 = 0;

-- Last: the counts' rows are locked until the commit, and ranges written
-- at the same time wait for each other only here.
INSERT INTO operation_counts (tenant_id, scope, status, n)
SELECT tenant_id, NULL, status, count(*) FROM big_ops GROUP BY tenant_id, status
ON CONFLICT (tenant_id, scope, status) DO UPDATE SET n = operation_counts.n + EXCLUDED.n;
