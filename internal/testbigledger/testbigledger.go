// Package testbigledger gives a test a ledger that has run for a while
// (a copy of one bigledger.Fill, testdb.NewFilled) and fails the test
// when a query reads that ledger's large tables unboundedly
// (bigledger.Check).
//
// It writes only into the test's own copy.
package testbigledger

import (
	"context"
	"fmt"
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
}

// New gives the test a copy of a ledger of bigledger.DefaultOperations
// operations, filled and analyzed once per server (testdb.NewFilled).
// ANALYZE, not VACUUM: the planner needs the statistics, and a VACUUM of
// every page would take longer than the fill. The copy carries the
// statistics, so every test judges the same plans.
func New(t testing.TB) *Ledger {
	t.Helper()
	return NewWith(t, bigledger.FillConfig{})
}

// NewWith is New with a fill of cfg's size.
func NewWith(t testing.TB, cfg bigledger.FillConfig) *Ledger {
	t.Helper()
	start := time.Now()
	// Range and Workers only cut the fill into transactions: the rows
	// are the same, so they do not name it.
	key := fmt.Sprintf("bigledger %s operations=%d subject=%s statistics=%d",
		bigledger.FillVersion, cfg.Operations, cfg.Subject, statisticsTarget)
	pool := testdb.NewFilled(t, key, func(ctx context.Context, pool *pgxpool.Pool) error {
		if err := bigledger.Fill(ctx, pool, cfg); err != nil {
			return err
		}
		_, err := bigledger.Analyze(ctx, pool, statisticsTarget)
		return err
	})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	l := &Ledger{Pool: pool}
	var err error
	if l.Fixture, err = bigledger.Pick(ctx, pool); err != nil {
		t.Fatal(err)
	}
	var ops, events int64
	if err := pool.QueryRow(ctx, `SELECT (SELECT count(*) FROM operations), (SELECT count(*) FROM operation_events)`).
		Scan(&ops, &events); err != nil {
		t.Fatalf("testbigledger: count: %v", err)
	}
	t.Logf("testbigledger: %d operations, %d events, ready in %s", ops, events, time.Since(start).Round(time.Millisecond))
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
