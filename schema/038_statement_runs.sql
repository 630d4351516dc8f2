-- 038_statement_runs: statement reconciliation, the ledger compared with
-- the records a supplier lists for a window of time (docs/contract.md,
-- "Statement reconciliation").
--
-- statement_runs: one row per run of one provider's statement, kept as
-- the history GET /v1/reconciliations pages through. A run belongs to its
-- provider's tenant (the providers file requires one) and to no scope:
-- its counts cover every operation of the provider, so only operators of
-- the whole tenant see it (scope_admits(caller, NULL)).
CREATE TABLE statement_runs (
    id          uuid PRIMARY KEY,
    tenant_id   uuid NOT NULL REFERENCES tenants (id),
    provider    text NOT NULL,
    since       timestamptz NOT NULL,
    until       timestamptz NOT NULL CHECK (since < until),
    started_at  timestamptz NOT NULL,
    finished_at timestamptz,
    status      text NOT NULL CHECK (status IN ('running', 'complete', 'incomplete', 'failed', 'yielded')),
    actor       text NOT NULL,   -- schedule, or operator:<token name> for `actledger reconcile`
    pages       integer NOT NULL DEFAULT 0,
    error       text,
    findings    jsonb NOT NULL DEFAULT '{}',
    CHECK ((status = 'running') = (finished_at IS NULL))
);
-- GET /v1/reconciliations: a tenant's runs, newest first, in pages.
CREATE INDEX statement_runs_list_idx ON statement_runs (tenant_id, started_at DESC, id DESC);
-- The console's and /metrics' last run per provider.
CREATE INDEX statement_runs_provider_idx ON statement_runs (provider, started_at DESC);

-- statement_leases: who runs a provider's statement now. A run takes the
-- row with a conditional upsert and renews it after every page; a process
-- that dies leaves a lease that expires, and the next run takes it over
-- (and marks the dead run failed). A row, not an advisory lock: several
-- ledgers may share a database under different schemas, and a row is
-- visible to an operator who asks why a run yielded.
CREATE TABLE statement_leases (
    provider   text PRIMARY KEY,
    run_id     uuid NOT NULL REFERENCES statement_runs (id) ON DELETE CASCADE,
    expires_at timestamptz NOT NULL
);

-- statement_records: what a run read and judged, one row per record (and
-- one per operation judged missing). A run writes each page's records as
-- it reads them, so its memory is one page whatever the window, and then
-- judges duplicates and missing operations in SQL over these rows. The
-- rows of records that need nobody (matched, foreign) are deleted when
-- the run ends; the others stay as the run's findings, with the record
-- as listed (bounded to 4 KB) for the person deciding.
CREATE TABLE statement_records (
    run_id             uuid NOT NULL REFERENCES statement_runs (id) ON DELETE CASCADE,
    seq                integer NOT NULL,
    finding            text CHECK (finding IN ('matched', 'settles', 'mismatch', 'duplicate', 'missing',
                                               'unexplained', 'foreign', 'skipped')),
    operation_id       uuid,
    reference          text,
    provider_reference text,
    created            timestamptz,
    skip               text,      -- why the record could not be judged
    record             jsonb,
    PRIMARY KEY (run_id, seq)
);
-- Duplicates: the records of one operation within a run.
CREATE INDEX statement_records_operation_idx ON statement_records (run_id, operation_id) WHERE operation_id IS NOT NULL;

-- Missing: the operations of a provider whose success was recorded in a
-- span. A succeeded operation's updated_at is the time of its success
-- (no statement changes a succeeded row but the move to review), so the
-- span is a range of this partial index; its entry is written once per
-- operation, as it succeeds.
CREATE INDEX operations_succeeded_idx ON operations (provider, updated_at) WHERE status = 'succeeded';

-- statement_totals: the findings of every run that was not a dry run,
-- summed per provider, for /metrics' actledger_reconcile_findings_total:
-- a counter that every process reports alike, written in the transaction
-- that ends the run, and whose read does not grow with the runs' history.
CREATE TABLE statement_totals (
    provider text NOT NULL,
    finding  text NOT NULL,
    n        bigint NOT NULL,
    PRIMARY KEY (provider, finding)
);
