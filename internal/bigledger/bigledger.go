// Package bigledger writes a ledger that has run for a while, and checks
// that the queries of the background loops and of the list endpoints stay
// bounded on it.
//
// Every figure of an empty database hides what grows: the ledger keeps
// every terminal operation and its events, so a query that reads them
// (a Seq Scan, an index walked without a bound) is fast in a test and
// slower every day in production. Fill writes a freshly migrated database
// full of operations (97 % terminal) and their history, set-based: 200,000
// in seconds for a test (internal/testbigledger), ten million in minutes
// for the benchmark's large stage (cmd/actbench). Check runs EXPLAIN
// ANALYZE of each query on it and says, with the plan, which read a large
// table unboundedly; the packages that own the queries list them
// (ledger.BoundedQueries, metrics.BoundedQueries, relay.BoundedQueries,
// as descriptions of package bounded, which imports nothing of actledger:
// a product package never links this one), so the test and the benchmark
// judge and time the same statements.
//
// A query it explains never commits: each runs in a transaction rolled
// back.
package bigledger

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/actledger/actledger/internal/bounded"
)

// Large are the tables that grow with every operation (or notification)
// ever made; a query may read them only through an index condition or
// under a limit.
var Large = []string{"operations", "operation_events", "outbox", "webhook_events", "notifications"}

// MaxRowsRead bounds the rows a query may read from one large table, the
// rows an index condition let through and then a filter dropped included:
// 2.5 % of a test's fill. It is more than the fill's open items of any one
// kind (at most 4,000 in review), so a query that reads the open items of
// a state passes, and far less than the terminal history, so one that
// walks the history to find them fails.
const MaxRowsRead = 5_000

// MaxPagesRead bounds the pages (8 kB buffers, of every table and index)
// one run of a query touches: four per row it may read. It catches what the
// row counts cannot see, an index condition that a scan checks entry by
// entry over a range of the index (a condition on the third column of an
// index whose second is not bound returns only the matching rows, after
// reading the whole range).
const MaxPagesRead = 4 * MaxRowsRead

// Pick reads a filled ledger's fixture.
func Pick(ctx context.Context, pool *pgxpool.Pool) (bounded.Fixture, error) {
	var f bounded.Fixture
	err := pool.QueryRow(ctx, `SELECT md5('tenant0')::uuid, md5('token0agent')::uuid, md5('token0approver')::uuid`).
		Scan(&f.Tenant, &f.Agent, &f.Approver)
	if err == nil {
		err = pool.QueryRow(ctx, `SELECT approval_id FROM operations
WHERE tenant_id = $1 AND status = 'queued' ORDER BY created_at LIMIT 1`, f.Tenant).Scan(&f.Approval)
	}
	if err == nil {
		err = pool.QueryRow(ctx, `SELECT o.id, o.action, o.key FROM operations o
WHERE o.tenant_id = $1 AND o.status = 'succeeded'
  AND (SELECT count(*) FROM operation_events e WHERE e.operation_id = o.id) = 5
ORDER BY o.created_at DESC LIMIT 1`, f.Tenant).Scan(&f.Settled, &f.SettledAction, &f.SettledKey)
	}
	if err == nil {
		rows, _ := pool.Query(ctx, `SELECT id FROM operations
WHERE tenant_id = $1 AND status = 'review' ORDER BY updated_at, id LIMIT 50`, f.Tenant)
		f.Review, err = pgx.CollectRows(rows, pgx.RowTo[uuid.UUID])
	}
	if err == nil && len(f.Review) > 0 {
		err = pool.QueryRow(ctx, `SELECT updated_at, id FROM operations WHERE id = $1`, f.Review[len(f.Review)-1]).
			Scan(&f.ReviewNextAt, &f.ReviewNextID)
	}
	if err == nil {
		err = pool.QueryRow(ctx, `SELECT created_at, id FROM operations WHERE tenant_id = $1
ORDER BY created_at, id OFFSET 50000 LIMIT 1`, f.Tenant).Scan(&f.MiddleAt, &f.MiddleID)
	}
	if err == nil {
		rows, _ := pool.Query(ctx, `SELECT id FROM operations
WHERE tenant_id = $1 AND status IN ('succeeded', 'failed', 'cancelled') ORDER BY created_at, id LIMIT 500`, f.Tenant)
		f.Old, err = pgx.CollectRows(rows, pgx.RowTo[uuid.UUID])
	}
	if err != nil {
		return f, fmt.Errorf("bigledger: pick rows: %w", err)
	}
	return f, nil
}

// version is a short digest of s.
func version(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:6])
}

// Result is what Check measured of one query.
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
	// PagesRead is the buffers the run touched, hit or read.
	PagesRead int64
	// Problems say how the plan reads a large table unboundedly; empty
	// when it is bounded.
	Problems []string
	// Plan is the text of the plan when there are Problems.
	Plan string
}

// Check runs each query twice under EXPLAIN ANALYZE, each time in a
// transaction rolled back, and reports its access paths and time, and as
// Problems whether its plan reads a large table by a Seq Scan, by an index
// scan with neither an index condition nor a limit above it, reads more
// than MaxRowsRead rows of one, or touches more than MaxPagesRead pages.
// An error is a query that did not run.
func Check(ctx context.Context, pool *pgxpool.Pool, queries ...bounded.Query) ([]Result, error) {
	partial, err := partialIndexes(ctx, pool)
	if err != nil {
		return nil, fmt.Errorf("bigledger: list partial indexes: %w", err)
	}
	var results []Result
	for _, q := range queries {
		var root planNode
		var execMs float64
		for range 2 {
			if root, execMs, err = explain(ctx, pool, q); err != nil {
				return results, fmt.Errorf("%s: explain: %w", q.Name, err)
			}
		}
		r := Result{Name: q.Name, Time: time.Duration(execMs * float64(time.Millisecond)),
			PagesRead: int64(root.SharedHitBlocks + root.SharedReadBlocks)}
		if maxPages := cmp.Or(q.MaxPages, MaxPagesRead); r.PagesRead > maxPages {
			r.Problems = append(r.Problems, fmt.Sprintf("%d pages touched (at most %d)", r.PagesRead, maxPages))
		}
		walk(root, false, func(n planNode, limited bool) {
			// A join that compares every row of one side with every
			// row of the other reads both sides' product, whatever
			// each scan reads.
			if compared := int64(n.RowsRemovedByJoinFilter * max(n.ActualLoops, 1)); compared > MaxRowsRead && readsLarge(n) {
				r.Problems = append(r.Problems, fmt.Sprintf("a %s that compared and dropped %d pairs of rows (at most %d)", n.NodeType, compared, MaxRowsRead))
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
				r.Problems = append(r.Problems, "a Seq Scan of "+n.RelationName)
			// A partial index holds the rows of its predicate (open
			// operations, unpublished messages): reading all of it is
			// bounded by them, and MaxRowsRead bounds how many.
			case strings.HasSuffix(n.NodeType, "Index Scan") && n.IndexCond == "" && !limited && !partial[n.IndexName]:
				r.Problems = append(r.Problems, fmt.Sprintf("a %s of %s without an index condition or a limit", n.NodeType, n.RelationName))
			}
			if read > MaxRowsRead {
				r.Problems = append(r.Problems, fmt.Sprintf("%d rows of %s read by a %s (at most %d)", read, n.RelationName, access, MaxRowsRead))
			}
		})
		if len(r.Problems) > 0 {
			r.Plan = textPlan(ctx, pool, q)
		}
		results = append(results, r)
	}
	return results, nil
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
	RowsRemovedByJoinFilter float64 `json:"Rows Removed by Join Filter"`
	// SharedHitBlocks and SharedReadBlocks are the buffers the node and
	// those below it touched (EXPLAIN's BUFFERS).
	SharedHitBlocks  float64    `json:"Shared Hit Blocks"`
	SharedReadBlocks float64    `json:"Shared Read Blocks"`
	Plans            []planNode `json:"Plans"`
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
func partialIndexes(ctx context.Context, pool *pgxpool.Pool) (map[string]bool, error) {
	rows, _ := pool.Query(ctx, `SELECT c.relname FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid
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

func isLarge(rel string) bool { return slices.Contains(Large, rel) }

// explain runs q under EXPLAIN ANALYZE in a transaction it rolls back.
func explain(ctx context.Context, pool *pgxpool.Pool, q bounded.Query) (planNode, float64, error) {
	tx, err := pool.Begin(ctx)
	if err != nil {
		return planNode{}, 0, err
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
	if err := settle(ctx, tx, q); err != nil {
		return planNode{}, 0, err
	}
	var out []struct {
		Plan          planNode `json:"Plan"`
		ExecutionTime float64  `json:"Execution Time"`
	}
	var raw []byte
	if err := tx.QueryRow(ctx, "EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) "+q.SQL, q.Args...).Scan(&raw); err != nil {
		return planNode{}, 0, err
	}
	if err := json.Unmarshal(raw, &out); err != nil || len(out) != 1 {
		return planNode{}, 0, fmt.Errorf("read plan: %v (%d plans)", err, len(out))
	}
	return out[0].Plan, out[0].ExecutionTime, nil
}

// settle runs q's Settings in tx.
func settle(ctx context.Context, tx pgx.Tx, q bounded.Query) error {
	if q.Settings == "" {
		return nil
	}
	if _, err := tx.Exec(ctx, q.Settings); err != nil {
		return fmt.Errorf("settings: %w", err)
	}
	return nil
}

// textPlan is q's plan as EXPLAIN ANALYZE prints it, for a failure's
// message.
func textPlan(ctx context.Context, pool *pgxpool.Pool, q bounded.Query) string {
	tx, err := pool.Begin(ctx)
	if err != nil {
		return err.Error()
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
	if err := settle(ctx, tx, q); err != nil {
		return err.Error()
	}
	rows, _ := tx.Query(ctx, "EXPLAIN (ANALYZE, BUFFERS, FORMAT TEXT) "+q.SQL, q.Args...)
	lines, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return err.Error()
	}
	return strings.Join(lines, "\n")
}
