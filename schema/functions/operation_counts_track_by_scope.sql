-- operation_counts_track_by_scope: operations by tenant, access scope and
-- state, without counting the ledger (schema 032).
--
-- /metrics reports operations by state, and the console's overview shows a
-- tenant's, or one access scope's: neither may count the ledger, a scan of
-- every operation ever made. A count kept by trigger costs a few rows to
-- read instead.
--
-- The trigger does not update one counter row per state: every transaction
-- that moves an operation would then hold that row's lock until it commits,
-- and concurrent dispatches and group-committed enqueues (which move many
-- operations out of and into the same few states) would queue behind each
-- other. It appends delta rows instead (inserts never wait for each other);
-- a reader sums operation_counts and the deltas, and the metrics collector
-- folds the deltas into operation_counts (DELETE … RETURNING, so two
-- collectors never fold the same delta twice). Reading is bounded by the
-- deltas since the last fold.
--
-- It is the statement trigger of every insert, update and delete of
-- operations (operation_counts_insert, _update and _delete, schema 032,
-- over the transition tables new_rows and old_rows) and appends one delta
-- row per tenant, scope and state whose count the statement changed. An
-- UPDATE's old and new rows pair up one to one (no update moves an
-- operation to another tenant or scope), so a state's net change is its new
-- rows minus its old rows: an operation whose state did not change adds +1
-- and -1 to the same state, and a statement that moves nothing appends
-- nothing.
--
-- It runs a statement or two per write: planned once (plan_cache_mode),
-- not once per write.
CREATE OR REPLACE FUNCTION operation_counts_track_by_scope() RETURNS trigger LANGUAGE plpgsql
SET plan_cache_mode = force_generic_plan
AS $$
BEGIN
    IF TG_OP = 'INSERT' THEN
        INSERT INTO operation_count_deltas (tenant_id, scope, status, delta)
        SELECT tenant_id, scope, status, count(*) FROM new_rows GROUP BY tenant_id, scope, status;
    ELSIF TG_OP = 'DELETE' THEN
        INSERT INTO operation_count_deltas (tenant_id, scope, status, delta)
        SELECT tenant_id, scope, status, -count(*) FROM old_rows GROUP BY tenant_id, scope, status;
    ELSE
        INSERT INTO operation_count_deltas (tenant_id, scope, status, delta)
        SELECT tenant_id, scope, status, sum(delta) FROM (
            SELECT tenant_id, scope, status, 1 AS delta FROM new_rows
            UNION ALL
            SELECT tenant_id, scope, status, -1 FROM old_rows
        ) d
        GROUP BY tenant_id, scope, status
        HAVING sum(delta) <> 0;
    END IF;
    RETURN NULL;
END;
$$;
