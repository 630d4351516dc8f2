package ledger

import (
	"context"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/jackc/pgx/v5"
)

// DefaultStatementRecordsKept is how long a prune keeps the records of a
// statement run that is not its provider's last: the findings a person
// acts on are review items and unmatched evidence, which stay with their
// operations' histories; the list per run is for the days after it.
const DefaultStatementRecordsKept = 7 * 24 * time.Hour

// A prune deletes statement runs and their records by age, a batch of
// runs a statement, never a provider's last finished run (the console
// and /metrics show it) nor one still running. statement_runs holds one
// row per run (the history GET /v1/reconciliations pages through), so it
// is read whole; statement_records only through its primary key's first
// column, run by run.
const (
	// statementRunsNotLast are the finished runs, ended before @cutoff,
	// that a newer finished run of the same provider follows.
	statementRunsNotLast = `SELECT r.id FROM statement_runs r
    WHERE r.finished_at < @cutoff
      AND EXISTS (SELECT 1 FROM statement_runs n
          WHERE n.provider = r.provider AND n.started_at > r.started_at AND n.finished_at IS NOT NULL)`

	// statementRecordsPrune deletes the records of a batch of such runs
	// that still have records.
	statementRecordsPrune = `WITH batch AS (
    ` + statementRunsNotLast + `
      AND EXISTS (SELECT 1 FROM statement_records x WHERE x.run_id = r.id)
    ORDER BY r.started_at, r.id
    LIMIT @limit
    FOR UPDATE OF r SKIP LOCKED
), gone AS (
    DELETE FROM statement_records x WHERE x.run_id IN (SELECT id FROM batch) RETURNING 1
)
SELECT (SELECT count(*) FROM batch), (SELECT count(*) FROM gone)`

	// statementRunsPrune deletes a batch of such runs with their records.
	statementRunsPrune = `WITH batch AS (
    ` + statementRunsNotLast + `
    ORDER BY r.started_at, r.id
    LIMIT @limit
    FOR UPDATE OF r SKIP LOCKED
), records AS (
    DELETE FROM statement_records x WHERE x.run_id IN (SELECT id FROM batch) RETURNING 1
), gone AS (
    DELETE FROM statement_runs r WHERE r.id IN (SELECT id FROM batch) RETURNING 1
)
SELECT (SELECT count(*) FROM gone), (SELECT count(*) FROM records)`
)

// PrunedStatements is what a statement prune batch deleted (or, in a dry
// run, would have).
type PrunedStatements struct {
	// Runs deleted, and Records deleted (with their runs, or alone).
	Runs, Records int64
	// Done says no batch remains.
	Done bool
}

// PruneStatementRecords deletes, in one statement, the records of at most
// limit statement runs that ended before cutoff and are not their
// provider's last finished run; the runs stay (their window, status and
// counts). A dry run counts every such run's records, whatever limit, in
// a transaction rolled back.
func (s *Store) PruneStatementRecords(ctx context.Context, cutoff time.Time, limit int, dryRun bool) (PrunedStatements, error) {
	return s.pruneStatements(ctx, statementRecordsPrune, cutoff, limit, dryRun, func(out *PrunedStatements, a, b int64) {
		out.Records = b
		out.Done = a < int64(limit)
	})
}

// PruneStatementRuns deletes, in one statement, at most limit statement
// runs that ended before cutoff and are not their provider's last
// finished run, with their records. A dry run counts every such run,
// whatever limit, in a transaction rolled back.
func (s *Store) PruneStatementRuns(ctx context.Context, cutoff time.Time, limit int, dryRun bool) (PrunedStatements, error) {
	return s.pruneStatements(ctx, statementRunsPrune, cutoff, limit, dryRun, func(out *PrunedStatements, a, b int64) {
		out.Runs, out.Records = a, b
		out.Done = a < int64(limit)
	})
}

func (s *Store) pruneStatements(ctx context.Context, sql string, cutoff time.Time, limit int, dryRun bool, read func(*PrunedStatements, int64, int64)) (PrunedStatements, error) {
	if limit <= 0 {
		limit = DefaultPruneBatch
	}
	if dryRun {
		limit = math.MaxInt32
	}
	var out PrunedStatements
	errDryRun := errors.New("dry run")
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		var a, b int64
		if err := tx.QueryRow(ctx, sql, pgx.StrictNamedArgs{"cutoff": cutoff, "limit": limit}).Scan(&a, &b); err != nil {
			return fmt.Errorf("prune statement runs: %w", err)
		}
		read(&out, a, b)
		if dryRun {
			out.Done = true
			return errDryRun
		}
		return nil
	})
	if err != nil && !errors.Is(err, errDryRun) {
		return PrunedStatements{}, err
	}
	return out, nil
}
