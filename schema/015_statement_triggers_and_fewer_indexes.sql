-- 015_statement_triggers_and_fewer_indexes: less work in Postgres per
-- change of an operation.
--
-- Postgres's CPU per operation bounds actledger's throughput, and two
-- costs scale with every changed row of operations: the row triggers of 011
-- and 013 (a PL/pgSQL call, and for the counts an INSERT, per row), and
-- index maintenance. No state change is a HOT update (status is in the
-- predicate of several indexes, updated_at and lease_expires_at are keys),
-- so every version of a row adds an entry to each full index and to each
-- partial index whose predicate it matches.
--
-- 1. Triggers. The counts and the change notifications are kept by
--    statement triggers over transition tables: one call per statement,
--    however many operations it moves (the dispatcher moves many in one
--    UPDATE … FROM unnest(…)), and one delta row per state whose net count
--    changed, not one or two per operation.
--
-- 2. Index audit of operations, operation_events and outbox: each index,
--    the queries that need it (EXPLAIN on 200,000 operations, 95 %
--    succeeded, 800,000 events, 400,000 outbox rows), and what happens to it.
--
--    operations
--    - operations_pkey (id): every read and write of one operation by id
--      (Get, Transition, Claim, ConfirmClaim, CheckLapse, watches, events'
--      and stale results' foreign keys). Kept.
--    - operations_tenant_id_action_key_key UNIQUE (tenant_id, action, key):
--      the dedup rule itself (ON CONFLICT of enqueue_operation and
--      Propose), GetByKey. Kept.
--    - operations_external_key_key UNIQUE (external_key): only
--      GetByExternalKey (the reconciler, evidence naming a key). The key is
--      always 'al_' || id (ledger.ExternalKey), so it is unique because id
--      is; a CHECK now says so, and GetByExternalKey finds the id in the
--      key and reads by the primary key. Dropped: it was the largest full
--      index (a 39-byte text key) and took an entry on every transition.
--    - operations_tenant_created_idx (tenant_id, created_at, id): the
--      agent's list (GET /v1/operations, newest first, Index Scan
--      Backward). Nothing narrower serves it. Kept.
--    - operations_open_idx (status, updated_at) over queued, dispatching,
--      retry_wait, unknown, review: the stuck-dispatch sweep (queued, by
--      updated_at), the review queue and its gauge (review), a resume
--      (queued, retry_wait, unknown). No query reads its dispatching
--      entries: the in-flight list and the lease sweep read
--      operations_lease_idx, whose rows they are. Replaced by
--      operations_waiting_idx without dispatching, so a claim and each
--      confirmation of a claim (two non-HOT updates per operation) no
--      longer add an entry to it.
--    - operations_lease_idx (lease_expires_at) WHERE dispatching: the lease
--      sweep (ORDER BY lease_expires_at) and the in-flight list. Kept.
--    - operations_due_idx (next_attempt_at) WHERE retry_wait, unknown: the
--      stuck-dispatch sweep's due retries and lookups. Kept.
--    - operations_unsent_approval_idx (approval_id) WHERE queued,
--      retry_wait: holding what a revoked approval or approver leaves
--      unsent (operationsUnsentByApproval(s)). Kept.
--    - operations_unsent_requested_by_idx (requested_by) WHERE queued,
--      retry_wait: meant for a revoked token's operations, but that query
--      (operationsUnsentByToken) also holds the token's open proposals
--      (awaiting_approval), so no plan could use it: a revocation read the
--      whole ledger (Seq Scan). Replaced by one whose predicate is the
--      query's. No code deletes approvals, api_tokens or tenants, so the
--      foreign keys need no full index on approval_id or requested_by.
--    - operations_awaiting_approval_idx (tenant_id, created_at, id) and
--      operations_request_expiry_idx (request_expires_at) WHERE
--      awaiting_approval: the approver's queue, its gauge and the expiry
--      sweep; written only for proposals. Kept.
--    - fillfactor stays 100: without HOT, free room on a page only lets a
--      new version land beside the old one; it would leave that room empty
--      in the settled pages that hold nearly every row. Only the
--      re-publish bookkeeping (redispatched_at) can be HOT, and it is rare.
--
--    operation_events
--    - operation_events_pkey (seq): no query reads events by seq alone;
--      every read is one operation's history in order (operationEvents,
--      its pages, EventsOf, the outcome and target checks), which
--      operation_events_operation_idx (operation_id, seq) serves. seq is
--      unique, so (operation_id, seq) is too: it becomes the primary key,
--      and each event adds one index entry instead of two.
--
--    outbox: all kept, each is read on the hot path or by the relay.
--    - outbox_pkey (id): the relay marks its batch published (id = ANY).
--    - outbox_unpublished_idx (id) WHERE published_at IS NULL: the relay's
--      claim in id order, the backlog gauge, and the sweeps' "is its
--      dispatch message still waiting" (waitsForMessage).
--    - outbox_scheduled_idx (deliver_after) WHERE unpublished and
--      scheduled: the relay's next due time.
--    (Deleting published rows scans the table; it runs rarely, on its own.)
--
-- Measured on the data set above (2 loaded cores, EXPLAIN ANALYZE of
-- UPDATEs that claim or settle operations, alternating 014 and 015):
-- a one-row UPDATE executes in 0.25–0.27 ms either way: its statement
-- triggers cost 0.06 ms where the row triggers cost 0.04, and the
-- dropped index entries give that back (5.5 WAL records instead of 7.0,
-- 689 bytes instead of 846). A hundred-row UPDATE spends 0.13–0.17 ms in
-- triggers instead of 0.83–1.02 ms and executes in 3.6–3.9 ms instead of
-- 4.3–4.9 ms. An event insert writes 2 WAL records instead of 3.

-- operation_counts_track (011) appends one delta row per state whose count
-- a statement changed. An UPDATE's old and new rows pair up one to one, so
-- a state's net change is its new rows minus its old rows: an operation
-- whose state did not change adds +1 and -1 to the same state, and a
-- statement that moves nothing appends nothing. The reader (metrics) sums
-- the deltas as before.
CREATE OR REPLACE FUNCTION operation_counts_track() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'INSERT' THEN
        INSERT INTO operation_count_deltas (status, delta)
        SELECT status, count(*) FROM new_rows GROUP BY status;
    ELSIF TG_OP = 'DELETE' THEN
        INSERT INTO operation_count_deltas (status, delta)
        SELECT status, -count(*) FROM old_rows GROUP BY status;
    ELSE
        INSERT INTO operation_count_deltas (status, delta)
        SELECT status, sum(delta) FROM (
            SELECT status, 1 AS delta FROM new_rows
            UNION ALL
            SELECT status, -1 FROM old_rows
        ) d
        GROUP BY status
        HAVING sum(delta) <> 0;
    END IF;
    RETURN NULL;
END;
$$;

DROP TRIGGER operation_counts_insert_delete ON operations;
DROP TRIGGER operation_counts_update ON operations;

-- A trigger with transition tables has one event, so three of them.
CREATE TRIGGER operation_counts_insert
    AFTER INSERT ON operations
    REFERENCING NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION operation_counts_track();

CREATE TRIGGER operation_counts_update
    AFTER UPDATE ON operations
    REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION operation_counts_track();

CREATE TRIGGER operation_counts_delete
    AFTER DELETE ON operations
    REFERENCING OLD TABLE AS old_rows
    FOR EACH STATEMENT EXECUTE FUNCTION operation_counts_track();

-- operation_changed (013) notifies, once per statement, every operation of
-- the statement whose version moved and that operation_watches lists:
-- same channel, same payload (the id), same rule as the row trigger it
-- replaces. A transition table cannot be limited to a column (UPDATE OF
-- version), so old and new rows are paired by id. Postgres still folds
-- repeats of one id within a transaction into one notification, and its
-- query still takes a fresh snapshot after the statement's rows are
-- written, so a registration (which locks the row FOR SHARE) is seen or
-- waited for exactly as before.
CREATE OR REPLACE FUNCTION operation_changed() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('actledger_operation', n.id::text)
    FROM new_rows n
    JOIN old_rows o ON o.id = n.id
    WHERE n.version IS DISTINCT FROM o.version
      AND EXISTS (SELECT 1 FROM operation_watches w WHERE w.operation_id = n.id);
    RETURN NULL;
END;
$$;

DROP TRIGGER operation_changed ON operations;

CREATE TRIGGER operation_changed
    AFTER UPDATE ON operations
    REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION operation_changed();

-- The external key is the id, spelled for providers; unique because the
-- id is.
ALTER TABLE operations
    ADD CONSTRAINT operations_external_key_is_id CHECK (external_key = 'al_' || id::text);
ALTER TABLE operations DROP CONSTRAINT operations_external_key_key;

-- Operations waiting for something other than a worker's lease: a
-- dispatch (queued), a retry (retry_wait), a lookup (unknown), a person
-- (review).
DROP INDEX operations_open_idx;
CREATE INDEX operations_waiting_idx ON operations (status, updated_at)
    WHERE status IN ('queued', 'retry_wait', 'unknown', 'review');

-- What a revoked token leaves unsent, its open proposals included.
DROP INDEX operations_unsent_requested_by_idx;
CREATE INDEX operations_unsent_requested_by_idx ON operations (requested_by)
    WHERE status IN ('awaiting_approval', 'queued', 'retry_wait');

-- One index per event: the history index is the primary key.
CREATE UNIQUE INDEX operation_events_operation_seq ON operation_events (operation_id, seq);
ALTER TABLE operation_events DROP CONSTRAINT operation_events_pkey;
ALTER TABLE operation_events ADD CONSTRAINT operation_events_pkey PRIMARY KEY USING INDEX operation_events_operation_seq;
DROP INDEX operation_events_operation_idx;
