-- 036_hot_path_without_foreign_keys: the operation's and its events'
-- foreign keys go.
--
-- Every row an operation's life writes checked its foreign keys: the
-- operation its tenant, approval and token, each of its events (three at
-- least) its operation and tenant. A check is a per-row trigger that reads
-- the parent row and locks it FOR KEY SHARE, and a lock is written into the
-- parent's tuple: a WAL record each time (the operation's row was just
-- written by the same transaction, so each event's check locked it anew),
-- and a MultiXact whenever two transactions lock the same tenant or
-- approval row at once, which group-committed enqueues and transitions do
-- all the time. Measured on the end-to-end stage (pg_waldump of its
-- maximum): 6.6 Heap/LOCK records and six checks per operation, about 280
-- of its 4,950 WAL bytes.
--
-- None of these keys can fail, by the way each row is written:
--   - tenants, approvals and api_tokens are never deleted (a token or an
--     approval is revoked, a row stays), and an operation takes its tenant
--     and token from the authenticated token, its approval from the row
--     its enqueue locks and updates (FOR UPDATE, one use) in the same
--     transaction; an approval id that names nothing is refused by that
--     update finding no row (approval_mismatch, "no such approval"), as
--     the key used to refuse it.
--   - an event's operation_id and tenant_id are copied from the operation's
--     row in the same statement, which holds a lock on it: the row it
--     inserted or updated, or, for an event that changes nothing
--     (ledger.eventAppend, keyConflictRecord), a row read FOR KEY SHARE. A
--     prune locks the operations it removes FOR UPDATE before anything
--     else, so an event's writer either commits first (and the prune, which
--     waited, deletes that event with the others) or waits for the prune
--     and then finds no row, and writes nothing.
-- TestEventOfAPrunedOperationIsNeverWritten checks the second, and
-- TestPruneUnderLoadLosesNoLiveOperation that no row names one that does
-- not exist after a prune beside live traffic.
ALTER TABLE operations DROP CONSTRAINT operations_tenant_id_fkey;
ALTER TABLE operations DROP CONSTRAINT operations_approval_id_fkey;
ALTER TABLE operations DROP CONSTRAINT operations_requested_by_fkey;
ALTER TABLE operation_events DROP CONSTRAINT operation_events_operation_id_fkey;
ALTER TABLE operation_events DROP CONSTRAINT operation_events_tenant_id_fkey;
