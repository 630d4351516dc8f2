-- 014_operations_list_index: an agent's list of its tenant's operations.
--
-- GET /v1/operations (no action and key) pages a tenant's operations newest
-- first by (created_at, id), optionally of one status. Without an index
-- every page sorted all of the tenant's history. None of these columns ever
-- changes after the insert, so state changes stay HOT updates; the cost is
-- one more index entry per new operation.
CREATE INDEX operations_tenant_created_idx ON operations (tenant_id, created_at, id);
