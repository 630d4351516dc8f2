-- large_cleanup.sql: remove what the benchmark's pipelines added to the
-- large ledger (see cleanLarge), in one transaction. The setting
-- actbench.filled_at is when the fill was written: every outbox row made
-- since is a pipeline's.

CREATE TEMP TABLE actbench_tenants ON COMMIT DROP AS
SELECT id FROM tenants WHERE name NOT LIKE 'big-%';

CREATE TEMP TABLE actbench_deleted ON COMMIT DROP AS
SELECT id FROM operations WHERE tenant_id IN (SELECT id FROM actbench_tenants);

SET LOCAL session_replication_role = replica;

DELETE FROM operation_events WHERE operation_id IN (SELECT id FROM actbench_deleted);
DELETE FROM operation_key_conflicts WHERE operation_id IN (SELECT id FROM actbench_deleted);
DELETE FROM operation_watches WHERE operation_id IN (SELECT id FROM actbench_deleted);
DELETE FROM stale_results WHERE operation_id IN (SELECT id FROM actbench_deleted);
DELETE FROM operations WHERE id IN (SELECT id FROM actbench_deleted);
DELETE FROM outbox WHERE created_at > current_setting('actbench.filled_at')::timestamptz;
DELETE FROM operation_count_deltas;
DELETE FROM approvals WHERE tenant_id IN (SELECT id FROM actbench_tenants);
DELETE FROM console_sessions WHERE token_id IN (SELECT id FROM api_tokens WHERE tenant_id IN (SELECT id FROM actbench_tenants));
DELETE FROM api_tokens WHERE tenant_id IN (SELECT id FROM actbench_tenants);
DELETE FROM dispatch_pauses WHERE tenant_id IN (SELECT id FROM actbench_tenants);
DELETE FROM unmatched_evidence WHERE tenant_id IN (SELECT id FROM actbench_tenants);
DELETE FROM tenants WHERE id IN (SELECT id FROM actbench_tenants);

SET LOCAL session_replication_role = origin;
