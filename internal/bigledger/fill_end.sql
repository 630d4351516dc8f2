-- fill_end.sql: the last part of the fill (see fill_chunk.sql), written
-- once after every range: evidence that matched no operation and one
-- dispatch pause.

SET LOCAL synchronous_commit = off;

INSERT INTO unmatched_evidence (tenant_id, provider, source, reference, status, owner, deadline, created_at, resolved_at)
SELECT md5('tenant' || u % 4)::uuid, 'mock', 'webhook:evt_unmatched_' || u, 'al_unknown_' || u, 'succeeded', 'ops',
       now() + interval '1 day', now() - (200 - u) * interval '1 hour',
       CASE WHEN u % 2 = 0 THEN now() - (200 - u) * interval '1 hour' + interval '1 minute' END
FROM generate_series(0, 199) u;

INSERT INTO dispatch_pauses (tenant_id, provider, action, paused_by)
VALUES (md5('tenant3')::uuid, 'mock', NULL, 'operator');
