-- 031_retention: terminal operations older than a retention period are
-- archived, then deleted (retention.Pruner, `actledger prune`).
--
-- 1. operation_events stays append-only for every writer but the pruner:
--    operation_events_append_only (functions/) now lets a DELETE through
--    when the deleting transaction has set actledger.prune to 'on'
--    (set_config(…, true): for that transaction only). Only the pruner's
--    batch transaction sets it, after archiving the histories it deletes;
--    an UPDATE is refused as before, and so is every DELETE of every
--    other transaction. The guard stays in place: it is against mistakes,
--    not against a role that may drop triggers anyway. This migration
--    holds no function body; it ships the changed file so that an older
--    binary starting during a rolling upgrade leaves the new body alone
--    (schema.go).
--
-- 2. operations_pruned counts, by the state it ended in, every operation
--    the pruner deleted. actledger_operations (GET /metrics) is a gauge
--    of the operations the ledger holds, kept by operation_counts_track_by_scope:
--    a pruned operation leaves it, as it leaves every list. The total
--    ever made in a state is that gauge plus
--    actledger_operations_pruned_total of the state. Only the pruner
--    writes here (one at a time, by advisory lock), once per batch and
--    state, so no hot-path transaction ever waits on these rows.
--
-- No index is added: the pruner selects a tenant's old operations by
-- operations_tenant_created_idx (created_at before the cutoff, in
-- (created_at, id) order from where its last batch ended), deletes their
-- events, key conflicts and stale results by the indexes that lead with
-- operation_id, and walks outbox and webhook_events in primary-key order
-- from the oldest row, stopping at the first batch written after the
-- cutoff.
CREATE TABLE operations_pruned (
    status text PRIMARY KEY,
    n      bigint NOT NULL CHECK (n > 0)
);
