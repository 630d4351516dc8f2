// Package testbigledger gives a test a ledger that has run for a while
// (bigledger.Fill into a database of its own, testdb) and fails the test
// when a query reads that ledger's large tables unboundedly
// (bigledger.Check).
//
// It never writes outside the test's own database.
package testbigledger

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/actledger/actledger/internal/bigledger"
	"github.com/actledger/actledger/internal/bounded"
	"github.com/actledger/actledger/internal/testdb"
)

// statisticsTarget makes ANALYZE read every row of the fill, not a random
// sample: a plan judged here must be the plan of every run, or a rare
// state's page flips between its own index and a walk of the tenant's
// history from one run to the next.
const statisticsTarget = 10_000

// Ledger is a filled test database and the rows its queries name.
type Ledger struct {
	Pool *pgxpool.Pool
	bounded.Fixture
	// FillTime is how long the fill and ANALYZE took.
	FillTime time.Duration
}

// New creates a test database (testdb.New), fills it with
// bigledger.DefaultOperations operations and analyzes it. ANALYZE, not
// VACUUM: the planner needs the statistics, and a VACUUM of every page
// would take longer than the fill.
func New(t testing.TB) *Ledger {
	t.Helper()
	return NewWith(t, bigledger.FillConfig{})
}

// NewWith is New with a fill of cfg's size.
func NewWith(t testing.TB, cfg bigledger.FillConfig) *Ledger {
	t.Helper()
	pool := testdb.New(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	start := time.Now()
	if err := bigledger.Fill(ctx, pool, cfg); err != nil {
		t.Fatal(err)
	}
	if _, err := bigledger.Analyze(ctx, pool, statisticsTarget); err != nil {
		t.Fatal(err)
	}
	l := &Ledger{Pool: pool, FillTime: time.Since(start)}
	var err error
	if l.Fixture, err = bigledger.Pick(ctx, pool); err != nil {
		t.Fatal(err)
	}
	var ops, events int64
	if err := pool.QueryRow(ctx, `SELECT (SELECT count(*) FROM operations), (SELECT count(*) FROM operation_events)`).
		Scan(&ops, &events); err != nil {
		t.Fatalf("testbigledger: count: %v", err)
	}
	t.Logf("testbigledger: %d operations, %d events, filled and analyzed in %s", ops, events, l.FillTime.Round(time.Millisecond))
	return l
}

// RequireBounded checks queries with bigledger.Check, logs every query's
// access paths and time, and fails t, with the plan, for each that reads
// a large table unboundedly.
func (l *Ledger) RequireBounded(t testing.TB, queries ...bounded.Query) []bigledger.Result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	results, err := bigledger.Check(ctx, l.Pool, queries...)
	if err != nil {
		t.Error(err)
	}
	for _, r := range results {
		t.Logf("%-40s %8.3f ms  rows read %6d  pages %6d  %s", r.Name, float64(r.Time)/float64(time.Millisecond), r.RowsRead, r.PagesRead, strings.Join(r.Access, "; "))
		if len(r.Problems) > 0 {
			t.Errorf("%s is not bounded on a large ledger: %s\n%s", r.Name, strings.Join(r.Problems, "; "), r.Plan)
		}
	}
	return results
}
