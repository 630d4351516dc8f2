-- 032_operation_counts_by_scope: operations by state, per tenant and
-- access scope.
--
-- operation_counts (011, 015) held one count per state for the whole
-- database: what /metrics reports, but not what a tenant's person may be
-- shown. The console's overview shows the operations of the signed-in
-- token's tenant, or of its access scope, by state, and must not count the
-- ledger to do it. The counts and their deltas now carry the tenant and
-- the scope (NULL: none); /metrics sums them over both, the overview over
-- the rows scope_admits lets its caller see. Scopes are few (each is a
-- token's), so a tenant has a few rows per state.
--
-- requires: operation_counts_track_by_scope
--
-- The counting trigger moves to a function of its own name, created just
-- before this migration and called by nothing until the triggers below
-- are made: a write never meets a function that expects columns this
-- migration has not added yet. Dropping the old triggers takes the table's
-- SHARE ROW EXCLUSIVE lock, so no operation changes between the count
-- below and the commit. Counting the ledger once here is what 011 did.
--
-- During a rolling upgrade an older process still reads the counts as
-- before (its sum by state is unchanged), but its fold (ON CONFLICT
-- (status)) finds no such key and fails, with a warning, and folds
-- nothing until it is replaced: the deltas wait for a newer process's
-- fold, and no count is lost.
DROP TRIGGER operation_counts_insert ON operations;
DROP TRIGGER operation_counts_update ON operations;
DROP TRIGGER operation_counts_delete ON operations;
DROP FUNCTION operation_counts_track();

DELETE FROM operation_count_deltas;
DELETE FROM operation_counts;
ALTER TABLE operation_counts DROP CONSTRAINT operation_counts_pkey;
ALTER TABLE operation_counts ADD COLUMN tenant_id uuid NOT NULL, ADD COLUMN scope text;
-- NULLS NOT DISTINCT: the operations without a scope are one count per
-- tenant and state, and the fold's ON CONFLICT finds it.
ALTER TABLE operation_counts ADD CONSTRAINT operation_counts_key UNIQUE NULLS NOT DISTINCT (tenant_id, scope, status);
ALTER TABLE operation_count_deltas ADD COLUMN tenant_id uuid NOT NULL, ADD COLUMN scope text;

INSERT INTO operation_counts (tenant_id, scope, status, n)
SELECT tenant_id, scope, status, count(*) FROM operations GROUP BY tenant_id, scope, status;

-- A trigger with transition tables has one event, so three of them.
CREATE TRIGGER operation_counts_insert
    AFTER INSERT ON operations
    REFERENCING NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION operation_counts_track_by_scope();

CREATE TRIGGER operation_counts_update
    AFTER UPDATE ON operations
    REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION operation_counts_track_by_scope();

CREATE TRIGGER operation_counts_delete
    AFTER DELETE ON operations
    REFERENCING OLD TABLE AS old_rows
    FOR EACH STATEMENT EXECUTE FUNCTION operation_counts_track_by_scope();
