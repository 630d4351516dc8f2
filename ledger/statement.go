package ledger

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
)

// RunStatus is where a statement run stands (statement_runs.status).
type RunStatus string

// Run statuses. A run is running until it ends in one of the others.
const (
	RunRunning RunStatus = "running"
	// RunComplete: the whole window was read and judged, missing
	// operations included.
	RunComplete RunStatus = "complete"
	// RunIncomplete: the run stopped before the window's end (max_pages,
	// a cursor that loops); what it read was judged, missing was not.
	RunIncomplete RunStatus = "incomplete"
	// RunFailed: the supplier or the ledger failed the run (an error
	// page, a timeout); what it read was judged, missing was not.
	RunFailed RunStatus = "failed"
	// RunYielded: another run of the provider held the lease; this one
	// read nothing.
	RunYielded RunStatus = "yielded"
)

// Finding is what a statement run concluded about one record or one
// operation (docs/contract.md, "Statement reconciliation").
type Finding string

// Findings, in the contract's order; FindingSkipped is a record the run
// could not judge (an expression failed on it, a created time outside the
// window), kept with its reason.
const (
	FindingMatched     Finding = "matched"
	FindingSettles     Finding = "settles"
	FindingMismatch    Finding = "mismatch"
	FindingDuplicate   Finding = "duplicate"
	FindingMissing     Finding = "missing"
	FindingUnexplained Finding = "unexplained"
	FindingForeign     Finding = "foreign"
	FindingSkipped     Finding = "skipped"
)

// Findings lists every finding, in the order above.
var Findings = []Finding{
	FindingMatched, FindingSettles, FindingMismatch, FindingDuplicate, FindingMissing,
	FindingUnexplained, FindingForeign, FindingSkipped,
}

// StatementRun is one run of a provider's statement.
type StatementRun struct {
	ID         uuid.UUID         `db:"id"`
	TenantID   uuid.UUID         `db:"tenant_id"`
	Provider   string            `db:"provider"`
	Since      time.Time         `db:"since"`
	Until      time.Time         `db:"until"`
	StartedAt  time.Time         `db:"started_at"`
	FinishedAt *time.Time        `db:"finished_at"`
	Status     RunStatus         `db:"status"`
	Actor      string            `db:"actor"`
	Pages      int               `db:"pages"`
	Error      *string           `db:"error"`
	Findings   map[Finding]int64 `db:"findings"`
}

// ErrLeaseLost: another run took the provider's lease (this run's expired
// while it waited on the supplier); the run stops without judging more.
var ErrLeaseLost = errors.New("ledger: the statement lease of this provider was taken over")

const (
	operationsOfStatement = `SELECT ` + operationColumns + `
FROM operations o JOIN tenants t ON t.id = o.tenant_id
WHERE o.external_key = ANY (@refs) AND o.external_key <> 'al_' || o.id::text AND o.provider = @provider
UNION ALL
SELECT ` + operationColumns + `
FROM operations o JOIN tenants t ON t.id = o.tenant_id
WHERE o.id = ANY (@ids) AND o.external_key = 'al_' || o.id::text AND o.provider = @provider`

	// operationsUnlisted reads operations_succeeded_idx from the span's
	// start: a page of the successes of the span, each checked against
	// the run's records by statement_records_operation_idx.
	operationsUnlisted = `SELECT ` + operationColumns + `
FROM operations o JOIN tenants t ON t.id = o.tenant_id
WHERE o.provider = $1 AND o.status = 'succeeded' AND o.updated_at >= $2 AND o.updated_at < $3
  AND ($5::timestamptz IS NULL OR (o.updated_at, o.id) > ($5, $6))
  AND NOT EXISTS (SELECT 1 FROM statement_records r WHERE r.run_id = $4 AND r.operation_id = o.id)
ORDER BY o.updated_at, o.id
LIMIT $7`
)

const statementRunColumns = `id, tenant_id, provider, since, until, started_at, finished_at, status, actor, pages, error, findings`

var (
	// statementRunStart records a new run and takes the provider's lease
	// when it is free or expired, in one statement: the run is running
	// when it holds the lease and yielded otherwise. A running run whose
	// lease expired is marked failed: its process stopped.
	statementRunStart = mustNamed(`WITH now AS (SELECT coalesce(@now::timestamptz, now()) AS at),
lease AS (
    INSERT INTO statement_leases (provider, run_id, expires_at)
    SELECT @provider, @id, at + @lease::interval FROM now
    ON CONFLICT (provider) DO UPDATE SET run_id = EXCLUDED.run_id, expires_at = EXCLUDED.expires_at
    WHERE statement_leases.expires_at <= (SELECT at FROM now)
    RETURNING run_id
),
previous AS (
    SELECT run_id, expires_at FROM statement_leases WHERE provider = @provider
),
abandoned AS (
    UPDATE statement_runs r SET status = 'failed', finished_at = (SELECT at FROM now),
        error = 'its process stopped before the run ended (the lease expired)'
    FROM previous p
    WHERE r.id = p.run_id AND r.status = 'running' AND EXISTS (SELECT 1 FROM lease)
)
INSERT INTO statement_runs (id, tenant_id, provider, since, until, started_at, finished_at, status, actor, error)
SELECT @id, @tenant, @provider, @since, @until, at,
    CASE WHEN EXISTS (SELECT 1 FROM lease) THEN NULL ELSE at END,
    CASE WHEN EXISTS (SELECT 1 FROM lease) THEN 'running' ELSE 'yielded' END,
    @actor,
    CASE WHEN EXISTS (SELECT 1 FROM lease) THEN NULL
         ELSE 'run ' || (SELECT run_id FROM previous) || ' of this provider holds the lease until ' || (SELECT expires_at FROM previous) END
FROM now
RETURNING ` + statementRunColumns)

	// statementLeaseRenew extends the lease while the run holds it.
	statementLeaseRenew = `UPDATE statement_leases SET expires_at = coalesce($3::timestamptz, now()) + $4::interval
WHERE provider = $1 AND run_id = $2`

	// statementRecordsDuplicates makes every record of an operation
	// judged duplicate a duplicate: the first of its records was judged
	// matched or settling before the second was read.
	statementRecordsDuplicates = `UPDATE statement_records SET finding = 'duplicate'
WHERE run_id = $1 AND finding IN ('matched', 'settles') AND operation_id IN (
    SELECT operation_id FROM statement_records WHERE run_id = $1 AND finding = 'duplicate')`

	// statementRecordsCount counts a run's findings: records, but
	// duplicates and missing operations once per operation.
	statementRecordsCount = `SELECT finding, CASE WHEN finding IN ('duplicate', 'missing')
    THEN count(DISTINCT operation_id) ELSE count(*) END
FROM statement_records WHERE run_id = $1 GROUP BY finding`

	// statementRecordsDeleteSettled drops the rows that need nobody.
	statementRecordsDeleteSettled = `DELETE FROM statement_records WHERE run_id = $1 AND finding IN ('matched', 'foreign')`

	statementTotalsAdd = `INSERT INTO statement_totals (provider, finding, n) VALUES ($1, $2, $3)
ON CONFLICT (provider, finding) DO UPDATE SET n = statement_totals.n + EXCLUDED.n`

	// statementRunFinish ends a running run and frees its lease.
	statementRunFinish = mustNamed(`WITH freed AS (
    DELETE FROM statement_leases WHERE provider = @provider AND run_id = @id
)
UPDATE statement_runs SET status = @status, finished_at = coalesce(@now::timestamptz, now()),
    pages = @pages, error = @error, findings = @findings
WHERE id = @id AND status = 'running'
RETURNING ` + statementRunColumns)
)

// NewStatementRun is a run to start.
type NewStatementRun struct {
	Tenant       uuid.UUID
	Provider     string
	Since, Until time.Time
	Actor        string
	// Lease is how long the run holds the provider without renewing.
	Lease time.Duration
}

// StartStatementRun records a run of the provider's statement and takes
// the provider's lease for it. A run that finds the lease held by a live
// run is recorded as yielded (and returned so, with the holder in Error):
// one run at a time per provider across every process.
func (s *Store) StartStatementRun(ctx context.Context, r NewStatementRun) (StatementRun, error) {
	args, err := statementRunStart.args(pgx.StrictNamedArgs{
		"id": uuid.New(), "tenant": r.Tenant, "provider": r.Provider, "since": r.Since, "until": r.Until,
		"actor": r.Actor, "lease": r.Lease, "now": s.nowArg(),
	})
	if err != nil {
		return StatementRun{}, err
	}
	rows, _ := s.pool.Query(ctx, statementRunStart.SQL, args...)
	run, err := pgx.CollectExactlyOneRow(rows, pgx.RowToStructByName[StatementRun])
	if err != nil {
		return StatementRun{}, fmt.Errorf("start statement run of %s: %w", r.Provider, err)
	}
	return run, nil
}

// RenewStatementLease extends run's lease of its provider by lease, or
// answers ErrLeaseLost when another run holds it now.
func (s *Store) RenewStatementLease(ctx context.Context, run StatementRun, lease time.Duration) error {
	tag, err := s.pool.Exec(ctx, statementLeaseRenew, run.Provider, run.ID, s.nowArg(), lease)
	if err != nil {
		return fmt.Errorf("renew statement lease of %s: %w", run.Provider, err)
	}
	if tag.RowsAffected() == 0 {
		return ErrLeaseLost
	}
	return nil
}

// FinishStatementRun ends run with status, its pages and error, and
// frees the provider's lease, in one transaction: the records of an
// operation that had two are counted duplicates (counted once per
// operation), the counts per finding are taken from what the run stored,
// and the rows of records that need nobody (matched, foreign) are deleted.
// A run that counts (not a dry run) adds its findings to the provider's
// totals (StatementTotals).
func (s *Store) FinishStatementRun(ctx context.Context, run StatementRun, status RunStatus, pages int, errText string, counts bool) (StatementRun, error) {
	var done StatementRun
	err := s.InTx(ctx, func(tx *Tx) error {
		if _, err := tx.tx.Exec(ctx, statementRecordsDuplicates, run.ID); err != nil {
			return fmt.Errorf("count duplicates: %w", err)
		}
		findings := map[Finding]int64{}
		rows, _ := tx.tx.Query(ctx, statementRecordsCount, run.ID)
		var f Finding
		var n int64
		if _, err := pgx.ForEachRow(rows, []any{&f, &n}, func() error { findings[f] = n; return nil }); err != nil {
			return fmt.Errorf("count findings: %w", err)
		}
		if _, err := tx.tx.Exec(ctx, statementRecordsDeleteSettled, run.ID); err != nil {
			return fmt.Errorf("delete settled records: %w", err)
		}
		if counts {
			for f, n := range findings {
				if _, err := tx.tx.Exec(ctx, statementTotalsAdd, run.Provider, f, n); err != nil {
					return fmt.Errorf("add to the totals: %w", err)
				}
			}
		}
		found, err := json.Marshal(findings)
		if err != nil {
			return fmt.Errorf("encode findings: %w", err)
		}
		args, err := statementRunFinish.args(pgx.StrictNamedArgs{
			"id": run.ID, "provider": run.Provider, "status": status, "pages": pages,
			"error": nullString(errText), "findings": found, "now": s.nowArg(),
		})
		if err != nil {
			return err
		}
		rows, _ = tx.tx.Query(ctx, statementRunFinish.SQL, args...)
		done, err = pgx.CollectExactlyOneRow(rows, pgx.RowToStructByName[StatementRun])
		if errors.Is(err, pgx.ErrNoRows) {
			return ErrLeaseLost
		}
		return err
	})
	if err != nil {
		return StatementRun{}, fmt.Errorf("finish statement run %s: %w", run.ID, err)
	}
	return done, nil
}

// StatementRecord is one row of statement_records: a record a run read,
// or an operation it judged missing.
type StatementRecord struct {
	Seq               int        `db:"seq"`
	Finding           Finding    `db:"finding"`
	OperationID       *uuid.UUID `db:"operation_id"`
	Reference         *string    `db:"reference"`
	ProviderReference *string    `db:"provider_reference"`
	Created           *time.Time `db:"created"`
	Skip              *string    `db:"skip"`
	Record            []byte     `db:"record"`
}

// StatementOperations returns the operations of provider named by the
// external keys refs, by key. Keys that are not an operation's, or are
// another provider's operation's, are left out.
func (s *Store) StatementOperations(ctx context.Context, provider string, refs []string) (map[string]Operation, error) {
	out := make(map[string]Operation, len(refs))
	if len(refs) == 0 {
		return out, nil
	}
	// A key made before schema 041 is read by the id it spells, a derived
	// one (or one inherited through a tombstone) by
	// operations_external_key_idx (operationsOfStatement).
	ids := make([]uuid.UUID, 0, len(refs))
	for _, ref := range refs {
		if id, ok := operationIDOf(ref); ok {
			ids = append(ids, id)
		}
	}
	rows, _ := s.pool.Query(ctx, operationsOfStatement, pgx.StrictNamedArgs{"refs": refs, "ids": ids, "provider": provider})
	ops, err := pgx.CollectRows(rows, pgx.RowToStructByName[Operation])
	if err != nil {
		return nil, fmt.Errorf("read operations of a statement page: %w", err)
	}
	for _, op := range ops {
		out[op.ExternalKey] = op
	}
	return out, nil
}

// UnlistedSuccesses returns at most limit operations of run's provider
// that succeeded in [from, to) and that no record the run stored names,
// after position after (nil: from the first), oldest success first: the
// missing of a run that read its whole window.
func (s *Store) UnlistedSuccesses(ctx context.Context, run StatementRun, from, to time.Time, after *Position, limit int) ([]Operation, error) {
	at, id := after.args()
	rows, _ := s.pool.Query(ctx, operationsUnlisted, run.Provider, from, to, run.ID, at, id, limit)
	ops, err := pgx.CollectRows(rows, pgx.RowToStructByName[Operation])
	if err != nil {
		return nil, fmt.Errorf("read unlisted successes of %s: %w", run.Provider, err)
	}
	return ops, nil
}

// AddStatementRecords stores what a run judged of one page, in one
// statement.
func (s *Store) AddStatementRecords(ctx context.Context, run uuid.UUID, recs []StatementRecord) error {
	if len(recs) == 0 {
		return nil
	}
	rows := make([][]any, len(recs))
	for i, r := range recs {
		var record any
		if len(r.Record) > 0 {
			record = r.Record
		}
		rows[i] = []any{run, r.Seq, r.Finding, r.OperationID, r.Reference, r.ProviderReference, r.Created, r.Skip, record}
	}
	_, err := s.pool.CopyFrom(ctx, pgx.Identifier{"statement_records"},
		[]string{"run_id", "seq", "finding", "operation_id", "reference", "provider_reference", "created", "skip", "record"},
		pgx.CopyFromRows(rows))
	if err != nil {
		return fmt.Errorf("store %d statement records: %w", len(recs), err)
	}
	return nil
}

const (
	// statementRunsPage is a page of a tenant's runs, newest first. Runs
	// have no scope: scope_admits shows them to callers of the whole
	// tenant only.
	statementRunsPage = `SELECT ` + statementRunColumns + ` FROM statement_runs
WHERE tenant_id = $1 AND scope_admits($2, NULL)
  AND ($3::timestamptz IS NULL OR (started_at, id) < ($3, $4))
ORDER BY started_at DESC, id DESC
LIMIT $5`

	// statementRunsLast is each provider's latest run of tenant $1 that
	// a caller of scope $2 may see; $1 NULL: of every tenant (/metrics,
	// the schedule). It skips from provider to provider along
	// statement_runs_provider_idx and reads one run of each, so it costs
	// a few index probes per provider however many runs are kept (a
	// DISTINCT ON read every run).
	statementRunsLast = `WITH RECURSIVE providers(name) AS (
    (SELECT provider FROM statement_runs ORDER BY provider LIMIT 1)
    UNION ALL
    SELECT (SELECT provider FROM statement_runs WHERE provider > providers.name ORDER BY provider LIMIT 1)
    FROM providers WHERE providers.name IS NOT NULL
)
SELECT r.* FROM providers CROSS JOIN LATERAL (
    SELECT ` + statementRunColumns + ` FROM statement_runs
    WHERE provider = providers.name AND ($1::uuid IS NULL OR (tenant_id = $1 AND scope_admits($2, NULL)))
    ORDER BY started_at DESC LIMIT 1
) r
WHERE providers.name IS NOT NULL
ORDER BY r.provider`
)

// StatementRuns lists at most limit of the runs in may see, newest first,
// after position after (nil: from the newest).
func (s *Store) StatementRuns(ctx context.Context, in Access, after *Position, limit int) ([]StatementRun, error) {
	at, id := after.args()
	rows, _ := s.pool.Query(ctx, statementRunsPage, in.Tenant, in.scope(), at, id, limit)
	runs, err := pgx.CollectRows(rows, pgx.RowToStructByName[StatementRun])
	if err != nil {
		return nil, fmt.Errorf("list statement runs: %w", err)
	}
	return runs, nil
}

// LastStatementRuns returns each provider's latest run that in may see
// (nil: of every tenant, for the process's own loops), by provider name.
func (s *Store) LastStatementRuns(ctx context.Context, in *Access) ([]StatementRun, error) {
	var tenant *uuid.UUID
	var scope *string
	if in != nil {
		tenant, scope = &in.Tenant, in.scope()
	}
	rows, _ := s.pool.Query(ctx, statementRunsLast, tenant, scope)
	runs, err := pgx.CollectRows(rows, pgx.RowToStructByName[StatementRun])
	if err != nil {
		return nil, fmt.Errorf("list last statement runs: %w", err)
	}
	return runs, nil
}

// StatementFindings returns at most limit of the rows run kept (the
// records and operations that need a person, and the skipped records),
// after seq after, in the order they were judged.
func (s *Store) StatementFindings(ctx context.Context, run uuid.UUID, after, limit int) ([]StatementRecord, error) {
	rows, _ := s.pool.Query(ctx, statementRecordsPage, run, after, limit)
	recs, err := pgx.CollectRows(rows, pgx.RowToStructByName[StatementRecord])
	if err != nil {
		return nil, fmt.Errorf("list findings of statement run %s: %w", run, err)
	}
	return recs, nil
}

// statementRunDelete deletes a run; its records and lease go with it.
const statementRunDelete = `DELETE FROM statement_runs WHERE id = $1`

const statementRecordsPage = `SELECT seq, finding, operation_id, reference, provider_reference, created, skip, record
FROM statement_records WHERE run_id = $1 AND seq > $2 ORDER BY seq LIMIT $3`

// DiscardStatementRun deletes run with its records and lease: a dry run
// changes nothing, its own record included.
func (s *Store) DiscardStatementRun(ctx context.Context, run StatementRun) error {
	if _, err := s.pool.Exec(ctx, statementRunDelete, run.ID); err != nil {
		return fmt.Errorf("discard statement run %s: %w", run.ID, err)
	}
	return nil
}
