-- fill_begin.sql: the first part of a ledger that has run for a while
-- (see fill_chunk.sql for the whole picture): its tenants, their tokens
-- and the approvals every operation is made under. One transaction; the
-- settings it reads are set by the caller (bigledger.Fill):
--   bigledger.operations   how many operations the whole fill writes.

-- A fill is rewritten from scratch when it is lost: its commits need not
-- wait for the disk.
SET LOCAL synchronous_commit = off;

INSERT INTO tenants (id, name, created_at)
SELECT md5('tenant' || t)::uuid, 'big-' || t, now() - interval '400 days'
FROM generate_series(0, 3) t;

INSERT INTO api_tokens (id, tenant_id, name, role, token_hash, created_at)
SELECT md5('token' || t || r)::uuid, md5('tenant' || t)::uuid, 'big-' || t || '-' || r, r,
       decode(md5('hash' || t || r), 'hex'), now() - interval '400 days'
FROM generate_series(0, 3) t, unnest(ARRAY['agent', 'approver']) r;

-- Approval a covers operations 100a … 100a+99, all of one tenant
-- (bigledger_tenant_of). One in fifty has expired since. Operation g was
-- made at now() - (N - g) · step, step spreading the N operations over
-- the same 69 days whatever N is (30 s apart at 200,000).
INSERT INTO approvals (id, tenant_id, action, params, params_fingerprint, policy_version,
    approver_token_id, expires_at, max_uses, uses, created_at, account, environment)
SELECT md5('approval' || a)::uuid, md5('tenant' || t)::uuid, 'order.create', '{}', md5('params' || a), 'v1',
       md5('token' || t || 'approver')::uuid,
       CASE WHEN a % 50 = 0 THEN now() - interval '1 day' ELSE now() + interval '30 days' END,
       1000, 100, now() - (n - 100 * a) * (interval '6000000 seconds' / n), 'acct', 'live'
FROM (SELECT current_setting('bigledger.operations')::bigint AS n) p
CROSS JOIN LATERAL generate_series(0, (n - 1) / 100) a
CROSS JOIN LATERAL (SELECT CASE WHEN a % 20 < 11 THEN 0 WHEN a % 20 < 16 THEN 1 WHEN a % 20 < 19 THEN 2 ELSE 3 END AS t) b;
