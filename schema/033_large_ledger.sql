-- 033_large_ledger: what ten million operations showed (the benchmark's
-- large stage, docs/benchmarks.md "The large stage").
--
-- 1. A tenant's unsent operations (queued, retry_wait, unknown) in
-- (created_at, id) order. GET /v1/operations?status=queued (or
-- retry_wait, unknown) and a resume's batches (operationsReleasable,
-- oldest first) read them in that order, and no index held them so:
-- operations_waiting_idx and operations_due_idx hold them by state and
-- time of change, so each page, and each batch of a resume, read every
-- unsent operation of every tenant and sorted them: on the ten-million
-- ledger (50,000 queued, 30,000 retry_wait, 20,000 unknown, spread over
-- 69 days of heap) 2.6 s for a page of queued operations, 2.1 s of
-- retry_wait, 0.36 s of unknown, 3.2 s for a batch of a resume; a
-- resume of a paused provider's backlog re-read the backlog for every
-- batch. With this index each reads its page (a resume's batch once its
-- pause check is a lookup per operation: ledger's waitsForMessage).
--
-- Partial: an entry is written as an operation is enqueued or waits for
-- a retry or a lookup, never for a claimed or settled one; the index
-- holds the unsent work, not the history.
CREATE INDEX operations_unsent_list_idx ON operations (tenant_id, created_at, id)
    WHERE status IN ('queued', 'retry_wait', 'unknown');

-- 2. Vacuum and statistics by the share of rows changed, per table. The
-- server's defaults (autovacuum_vacuum_scale_factor 0.2,
-- autovacuum_vacuum_insert_scale_factor 0.2, autovacuum_analyze_scale_factor
-- 0.1) wait for 2,000,000 dead versions of operations at ten million rows
-- (every transition leaves one: a state change is never a HOT update, the
-- state and updated_at being indexed) and for 8,000,000 new events before
-- the visibility map catches up; the statistics of the rare states the
-- planner chooses between partial indexes by go stale for a million
-- changes. At 2 % a vacuum of operations comes every 200,000 changes and
-- took about 5 s here (a VACUUM after 50,000 operations' worth of
-- changes, operations and events together, on the ten-million ledger).
ALTER TABLE operations SET (
    autovacuum_vacuum_scale_factor = 0.02,
    autovacuum_vacuum_insert_scale_factor = 0.02,
    autovacuum_analyze_scale_factor = 0.02
);
ALTER TABLE operation_events SET (
    autovacuum_vacuum_insert_scale_factor = 0.02,
    autovacuum_analyze_scale_factor = 0.02
);
