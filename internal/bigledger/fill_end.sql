-- fill_end.sql: the last part of the fill (see fill_chunk.sql), written
-- once after every range: evidence that matched no operation, one
-- dispatch pause, and notifications: a receiver of each tenant and 20,000
-- events of the last two weeks, settled but for the newest 100 (the
-- stalled-notification sweep reads those through notifications_open_idx).

SET LOCAL synchronous_commit = off;

INSERT INTO unmatched_evidence (tenant_id, provider, source, reference, status, owner, deadline, created_at, resolved_at)
SELECT md5('tenant' || u % 4)::uuid, 'mock', 'webhook:evt_unmatched_' || u, 'al_unknown_' || u, 'succeeded', 'ops',
       now() + interval '1 day', now() - (200 - u) * interval '1 hour',
       CASE WHEN u % 2 = 0 THEN now() - (200 - u) * interval '1 hour' + interval '1 minute' END
FROM generate_series(0, 199) u;

INSERT INTO dispatch_pauses (tenant_id, provider, action, paused_by)
VALUES (md5('tenant3')::uuid, 'mock', NULL, 'operator');

INSERT INTO notification_receivers (name, tenant_id, events, subject, created_at, updated_at)
SELECT 'big-' || t || '-ops', md5('tenant' || t)::uuid, '{operation.settled}',
       'actledger.notify.' || md5('tenant' || t)::uuid, now() - interval '400 days', now() - interval '400 days'
FROM generate_series(0, 3) t;

INSERT INTO notifications (id, tenant_id, type, operation_id, status, at, settled_at)
SELECT md5('notification' || i)::uuid, md5('tenant' || i % 4)::uuid, 'operation.settled', md5('notified' || i)::uuid,
       'succeeded', now() - (20000 - i) * interval '1 minute',
       CASE WHEN i < 19900 THEN now() - (20000 - i) * interval '1 minute' + interval '2 seconds' END
FROM generate_series(0, 19999) i;
