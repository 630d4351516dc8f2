-- 011_operation_counts: operations by state without counting the ledger,
-- and the approvals of an approver token found without a scan.
--
-- /metrics reported operations by state with SELECT status, count(*) FROM
-- operations GROUP BY status: a scan of the whole ledger on every scrape of
-- every process, growing with every operation ever made. A count kept by
-- trigger costs a few rows to read instead.
--
-- The trigger does not update one counter row per state: every transaction
-- that moves an operation would then hold that row's lock until it commits,
-- and concurrent dispatches and group-committed enqueues (which move many
-- operations out of and into the same few states) would queue behind each
-- other. It appends a delta row instead (inserts never wait for each
-- other); a reader sums operation_counts and the deltas, and the metrics
-- collector folds the deltas into operation_counts (DELETE … RETURNING, so
-- two collectors never fold the same delta twice). Reading is bounded by
-- the deltas since the last fold.

-- operation_counts holds the folded count of operations in each state.
CREATE TABLE operation_counts (
    status text PRIMARY KEY,
    n      bigint NOT NULL
);

-- operation_count_deltas holds changes not folded yet: +1 for a state
-- entered, -1 for a state left. No index: it is only appended to and read
-- or emptied whole.
CREATE TABLE operation_count_deltas (
    status text NOT NULL,
    delta  integer NOT NULL
);

CREATE FUNCTION operation_counts_track() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'INSERT' THEN
        INSERT INTO operation_count_deltas (status, delta) VALUES (NEW.status, 1);
    ELSIF TG_OP = 'DELETE' THEN
        INSERT INTO operation_count_deltas (status, delta) VALUES (OLD.status, -1);
    ELSE
        INSERT INTO operation_count_deltas (status, delta) VALUES (OLD.status, -1), (NEW.status, 1);
    END IF;
    RETURN NULL;
END;
$$;

CREATE TRIGGER operation_counts_insert_delete
    AFTER INSERT OR DELETE ON operations
    FOR EACH ROW EXECUTE FUNCTION operation_counts_track();

-- Most transitions rewrite status; only a change of state is counted.
CREATE TRIGGER operation_counts_update
    AFTER UPDATE OF status ON operations
    FOR EACH ROW WHEN (OLD.status IS DISTINCT FROM NEW.status)
    EXECUTE FUNCTION operation_counts_track();

-- TRUNCATE fires no row triggers: start the counts again from nothing.
CREATE FUNCTION operation_counts_reset() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    DELETE FROM operation_count_deltas;
    DELETE FROM operation_counts;
    RETURN NULL;
END;
$$;

CREATE TRIGGER operation_counts_truncate
    AFTER TRUNCATE ON operations
    FOR EACH STATEMENT EXECUTE FUNCTION operation_counts_reset();

-- The ledger as it is when this runs (the triggers above already hold the
-- table against concurrent writes until this transaction commits).
INSERT INTO operation_counts (status, n)
SELECT status, count(*) FROM operations GROUP BY status;

-- Revoking an approver's token revokes the approvals it granted that still
-- stand (ledger.RevokeApprovalsOfApprover); only those are indexed.
CREATE INDEX approvals_standing_approver_idx ON approvals (approver_token_id)
    WHERE revoked_at IS NULL;
