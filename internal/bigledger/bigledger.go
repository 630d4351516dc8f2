// Package bigledger gives a test a ledger that has run for a while, and
// checks that the queries of the background loops and of the list
// endpoints stay bounded on it.
//
// Every figure of an empty database hides what grows: the ledger keeps
// every terminal operation and its events, so a query that reads them
// (a Seq Scan, an index walked without a bound) is fast in a test and
// slower every day in production. New fills a fresh test database with
// 200,000 operations (97 % terminal) and their history in a few seconds
// (fill.sql); Ledger.RequireBounded runs EXPLAIN ANALYZE of each query on
// it and fails the test, with the plan, when one reads a large table
// unboundedly.
//
// It never writes outside the test's own database (testdb), and a query
// it explains never commits: each runs in a transaction rolled back.
package bigledger

import (
	"context"
	_ "embed"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/actledger/actledger/internal/testdb"
)

//go:embed fill.sql
var fillSQL string

// Large are the tables that grow with every operation ever made; a query
// may read them only through an index condition or under a limit.
var Large = []string{"operations", "operation_events", "outbox", "webhook_events"}

// MaxRowsRead bounds the rows a query may read from one large table, the
// rows an index condition let through and then a filter dropped included:
// 2.5 % of the fill's operations. It is more than the fill's open items of
// any one kind (1,600 in review), so a query that reads the open items of
// a state passes, and far less than the terminal history, so one that
// walks the history to find them fails.
const MaxRowsRead = 5_000

// Ledger is a filled test database and what a test needs to name its
// rows in query parameters.
type Ledger struct {
	Pool *pgxpool.Pool
	// Tenant is the largest tenant (55 % of the operations).
	Tenant uuid.UUID
	// Agent and Approver are the tenant's tokens.
	Agent, Approver uuid.UUID
	// Approval is a standing approval of the tenant with unsent
	// operations under it.
	Approval uuid.UUID
	// Settled is a succeeded operation of the tenant with five events.
	Settled uuid.UUID
	// Review are up to 50 of the tenant's operations in review, longest
	// waiting first: a review page.
	Review []uuid.UUID
	// FillTime is how long the fill and ANALYZE took.
	FillTime time.Duration
}

// New creates a test database (testdb.New), fills it with fill.sql and
// analyzes it.
func New(t testing.TB) *Ledger {
	t.Helper()
	pool := testdb.New(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	start := time.Now()
	// One implicit transaction (the simple protocol runs the whole file
	// as one): one commit to wait for. ANALYZE, not VACUUM: the planner
	// needs the statistics, and a VACUUM of every page would take longer
	// than the fill. The statistics read every row (the largest sample
	// target), not a random sample: a plan judged here must be the plan
	// of every run, or a rare state's page flips between its own index
	// and a walk of the tenant's history from one run to the next.
	if _, err := pool.Exec(ctx, fillSQL, pgx.QueryExecModeSimpleProtocol); err != nil {
		t.Fatalf("bigledger: fill: %v", err)
	}
	if _, err := pool.Exec(ctx, "SET default_statistics_target = 10000; ANALYZE; RESET default_statistics_target", pgx.QueryExecModeSimpleProtocol); err != nil {
		t.Fatalf("bigledger: analyze: %v", err)
	}
	l := &Ledger{Pool: pool, FillTime: time.Since(start)}
	err := pool.QueryRow(ctx, `SELECT md5('tenant0')::uuid, md5('token0agent')::uuid, md5('token0approver')::uuid`).
		Scan(&l.Tenant, &l.Agent, &l.Approver)
	if err == nil {
		err = pool.QueryRow(ctx, `SELECT approval_id FROM operations
WHERE tenant_id = $1 AND status = 'queued' ORDER BY created_at LIMIT 1`, l.Tenant).Scan(&l.Approval)
	}
	if err == nil {
		err = pool.QueryRow(ctx, `SELECT o.id FROM operations o
WHERE o.tenant_id = $1 AND o.status = 'succeeded'
  AND (SELECT count(*) FROM operation_events e WHERE e.operation_id = o.id) = 5
ORDER BY o.created_at DESC LIMIT 1`, l.Tenant).Scan(&l.Settled)
	}
	if err == nil {
		rows, _ := pool.Query(ctx, `SELECT id FROM operations
WHERE tenant_id = $1 AND status = 'review' ORDER BY updated_at, id LIMIT 50`, l.Tenant)
		l.Review, err = pgx.CollectRows(rows, pgx.RowTo[uuid.UUID])
	}
	if err != nil {
		t.Fatalf("bigledger: pick rows: %v", err)
	}
	var ops, events int64
	if err := pool.QueryRow(ctx, `SELECT (SELECT count(*) FROM operations), (SELECT count(*) FROM operation_events)`).
		Scan(&ops, &events); err != nil {
		t.Fatalf("bigledger: count: %v", err)
	}
	t.Logf("bigledger: %d operations, %d events, filled and analyzed in %s", ops, events, l.FillTime.Round(time.Millisecond))
	return l
}

// Query is a statement to check and its parameters: positional, or one
// pgx.NamedArgs / pgx.StrictNamedArgs.
type Query struct {
	Name string
	SQL  string
	Args []any
}

// Result is what RequireBounded measured of one query.
type Result struct {
	Name string
	// Access is how the plan reads each large table it reads:
	// "Index Scan operations_lease_idx on operations".
	Access []string
	// Time is the execution time of the second run (the first warms the
	// cache), as EXPLAIN ANALYZE reports it.
	Time time.Duration
	// RowsRead is the most rows the plan read from one large table.
	RowsRead int64
}

// RequireBounded runs each query twice under EXPLAIN ANALYZE, each time in
// a transaction rolled back, and fails t for each whose plan reads a large
// table by a Seq Scan, by an index scan with neither an index condition
// nor a limit above it, or reads more than MaxRowsRead rows of one. It
// logs every query's access paths and time and returns them.
func (l *Ledger) RequireBounded(t testing.TB, queries ...Query) []Result {
	t.Helper()
	partial, err := l.partialIndexes()
	if err != nil {
		t.Fatalf("bigledger: list partial indexes: %v", err)
	}
	var results []Result
	for _, q := range queries {
		var root planNode
		var execMs float64
		for range 2 {
			var err error
			root, execMs, err = l.explain(q)
			if err != nil {
				t.Errorf("%s: explain: %v", q.Name, err)
				break
			}
		}
		if root.NodeType == "" {
			continue
		}
		r := Result{Name: q.Name, Time: time.Duration(execMs * float64(time.Millisecond))}
		var problems []string
		walk(root, false, func(n planNode, limited bool) {
			// A join that compares every row of one side with every
			// row of the other reads both sides' product, whatever
			// each scan reads.
			if compared := int64(n.RowsRemovedByJoinFilter * max(n.ActualLoops, 1)); compared > MaxRowsRead && readsLarge(n) {
				problems = append(problems, fmt.Sprintf("a %s that compared and dropped %d pairs of rows (at most %d)", n.NodeType, compared, MaxRowsRead))
			}
			if !isLarge(n.RelationName) {
				return
			}
			access := n.NodeType
			if n.IndexName != "" {
				access += " " + n.IndexName
			}
			access += " on " + n.RelationName
			r.Access = append(r.Access, access)
			read := int64((n.ActualRows + n.RowsRemovedByFilter) * max(n.ActualLoops, 1))
			r.RowsRead = max(r.RowsRead, read)
			switch {
			case n.NodeType == "Seq Scan":
				problems = append(problems, "a Seq Scan of "+n.RelationName)
			// A partial index holds the rows of its predicate (open
			// operations, unpublished messages): reading all of it is
			// bounded by them, and MaxRowsRead bounds how many.
			case strings.HasSuffix(n.NodeType, "Index Scan") && n.IndexCond == "" && !limited && !partial[n.IndexName]:
				problems = append(problems, fmt.Sprintf("a %s of %s without an index condition or a limit", n.NodeType, n.RelationName))
			}
			if read > MaxRowsRead {
				problems = append(problems, fmt.Sprintf("%d rows of %s read by a %s (at most %d)", read, n.RelationName, access, MaxRowsRead))
			}
		})
		t.Logf("%-40s %8.3f ms  rows read %6d  %s", q.Name, execMs, r.RowsRead, strings.Join(r.Access, "; "))
		if len(problems) > 0 {
			t.Errorf("%s is not bounded on a large ledger: %s\n%s", q.Name, strings.Join(problems, "; "), l.textPlan(q))
		}
		results = append(results, r)
	}
	return results
}

// planNode is the part of a node of EXPLAIN (FORMAT JSON) the checks read.
type planNode struct {
	NodeType            string  `json:"Node Type"`
	RelationName        string  `json:"Relation Name"`
	IndexName           string  `json:"Index Name"`
	IndexCond           string  `json:"Index Cond"`
	ActualRows          float64 `json:"Actual Rows"`
	ActualLoops         float64 `json:"Actual Loops"`
	RowsRemovedByFilter float64 `json:"Rows Removed by Filter"`
	// RowsRemovedByJoinFilter is a join's: pairs it formed and dropped.
	RowsRemovedByJoinFilter float64    `json:"Rows Removed by Join Filter"`
	Plans                   []planNode `json:"Plans"`
}

// walk calls visit for n and every node below it, telling each whether a
// Limit bounds what it reads: one stands above it, with no node between
// them that reads its whole input before it returns a row.
func walk(n planNode, limited bool, visit func(planNode, bool)) {
	visit(n, limited)
	switch n.NodeType {
	case "Limit":
		limited = true
	case "Sort", "Aggregate", "Hash", "Materialize", "SetOp", "WindowAgg", "Unique":
		limited = false
	}
	for _, c := range n.Plans {
		walk(c, limited, visit)
	}
}

// readsLarge says whether n or a node below it reads a large table.
func readsLarge(n planNode) bool {
	found := false
	walk(n, false, func(c planNode, _ bool) { found = found || isLarge(c.RelationName) })
	return found
}

// partialIndexes names the indexes with a predicate.
func (l *Ledger) partialIndexes() (map[string]bool, error) {
	rows, _ := l.Pool.Query(context.Background(), `SELECT c.relname FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid
WHERE i.indpred IS NOT NULL`)
	names, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, err
	}
	partial := make(map[string]bool, len(names))
	for _, n := range names {
		partial[n] = true
	}
	return partial, nil
}

func isLarge(rel string) bool {
	for _, l := range Large {
		if rel == l {
			return true
		}
	}
	return false
}

// explain runs q under EXPLAIN ANALYZE in a transaction it rolls back.
func (l *Ledger) explain(q Query) (planNode, float64, error) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	tx, err := l.Pool.Begin(ctx)
	if err != nil {
		return planNode{}, 0, err
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
	var out []struct {
		Plan          planNode `json:"Plan"`
		ExecutionTime float64  `json:"Execution Time"`
	}
	var raw []byte
	if err := tx.QueryRow(ctx, "EXPLAIN (ANALYZE, FORMAT JSON) "+q.SQL, q.Args...).Scan(&raw); err != nil {
		return planNode{}, 0, err
	}
	if err := json.Unmarshal(raw, &out); err != nil || len(out) != 1 {
		return planNode{}, 0, fmt.Errorf("read plan: %v (%d plans)", err, len(out))
	}
	return out[0].Plan, out[0].ExecutionTime, nil
}

// textPlan is q's plan as EXPLAIN ANALYZE prints it, for a failure's
// message.
func (l *Ledger) textPlan(q Query) string {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	tx, err := l.Pool.Begin(ctx)
	if err != nil {
		return err.Error()
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
	rows, _ := tx.Query(ctx, "EXPLAIN (ANALYZE, FORMAT TEXT) "+q.SQL, q.Args...)
	lines, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return err.Error()
	}
	return strings.Join(lines, "\n")
}
