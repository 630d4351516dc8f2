package schema_test

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/actledger/actledger/internal/testdb"
)

// fixtureInsert makes the tenant, token and approval that operations of
// these tests refer to.
const fixtureInsert = `WITH t AS (
    INSERT INTO tenants (id, name) VALUES ($1, 'acme') RETURNING id
), k AS (
    INSERT INTO api_tokens (id, tenant_id, name, role, token_hash)
    SELECT $2, id, 'agent', 'agent', '\x00' FROM t RETURNING id, tenant_id
)
INSERT INTO approvals (id, tenant_id, action, params, params_fingerprint, policy_version,
    approver_token_id, expires_at, max_uses)
SELECT $3, tenant_id, 'a', '{}', 'fp', 'p1', id, now() + interval '1 hour', 1 FROM k`

// operationsInsert inserts operations keyed k<from>…k<to>, the state of
// each chosen by its number modulo 3: queued, succeeded, failed.
const operationsInsert = `INSERT INTO operations (id, tenant_id, action, key, provider, params,
    params_fingerprint, approval_id, requested_by, external_key, status)
SELECT id, $1, 'a', 'k' || g, 'acme', '{}', 'fp', $3, $2, 'al_' || id,
       (ARRAY['queued', 'succeeded', 'failed'])[1 + g % 3]
FROM (SELECT g, gen_random_uuid() AS id FROM generate_series($4::int, $5::int) g) s
ON CONFLICT (tenant_id, action, key) DO NOTHING`

type fixture struct {
	pool                    *pgxpool.Pool
	tenant, token, approval uuid.UUID
}

func setup(t *testing.T) fixture {
	t.Helper()
	f := fixture{pool: testdb.New(t), tenant: uuid.New(), token: uuid.New(), approval: uuid.New()}
	if _, err := f.pool.Exec(context.Background(), fixtureInsert, f.tenant, f.token, f.approval); err != nil {
		t.Fatal(err)
	}
	return f
}

// insert inserts operations k<from>…k<to> in one statement.
func (f fixture) insert(t *testing.T, from, to int) {
	t.Helper()
	if _, err := f.pool.Exec(context.Background(), operationsInsert, f.tenant, f.token, f.approval, from, to); err != nil {
		t.Fatal(err)
	}
}

func (f fixture) counts(t *testing.T, query string) map[string]int64 {
	t.Helper()
	rows, _ := f.pool.Query(context.Background(), query)
	type row struct {
		Status string
		N      int64
	}
	list, err := pgx.CollectRows(rows, pgx.RowToStructByPos[row])
	if err != nil {
		t.Fatal(err)
	}
	out := make(map[string]int64)
	for _, r := range list {
		if r.N != 0 {
			out[r.Status] = r.N
		}
	}
	return out
}

const (
	// countsKept is what the metrics collector reports (metrics'
	// operationsByState): the folded counts plus the deltas.
	countsKept = `SELECT status, sum(n)::bigint FROM (
    SELECT status, n FROM operation_counts
    UNION ALL
    SELECT status, delta FROM operation_count_deltas
) c GROUP BY status`
	countsTrue  = `SELECT status, count(*) FROM operations GROUP BY status`
	deltasCount = `SELECT count(*) FROM operation_count_deltas`
)

// TestOperationCountsFollowMultiRowStatements: after every statement that
// inserts, moves or deletes many operations at once, the counts the
// metrics read (operation_counts plus deltas) equal a count of the
// operations table, and each statement appends one delta row per state
// whose count it changed (none when it moved nothing, or moved as many
// operations out of a state as into it).
func TestOperationCountsFollowMultiRowStatements(t *testing.T) {
	t.Parallel()
	f := setup(t)
	ctx := context.Background()
	f.insert(t, 1, 300)

	for _, step := range []struct {
		name       string
		sql        string
		wantDeltas int
	}{
		{"insert many", "", 0}, // the insert above: queued, succeeded, failed
		{"update moves one state, rewrites the others",
			`UPDATE operations SET version = version + 1,
                status = CASE WHEN status = 'queued' THEN 'held' ELSE status END`, 2},
		{"update swaps as many succeeded and failed",
			`UPDATE operations SET status = CASE status WHEN 'succeeded' THEN 'failed' ELSE 'succeeded' END
             WHERE id IN ((SELECT id FROM operations WHERE status = 'succeeded' ORDER BY key LIMIT 40)
                UNION ALL (SELECT id FROM operations WHERE status = 'failed' ORDER BY key LIMIT 40))`, 0},
		{"update swaps unequal numbers",
			`UPDATE operations SET status = CASE status WHEN 'succeeded' THEN 'failed' ELSE 'succeeded' END
             WHERE id IN ((SELECT id FROM operations WHERE status = 'succeeded' ORDER BY key LIMIT 30)
                UNION ALL (SELECT id FROM operations WHERE status = 'failed' ORDER BY key LIMIT 10))`, 2},
		{"update changes no state", `UPDATE operations SET version = version + 1`, 0},
		{"update matches nothing", `UPDATE operations SET status = 'failed' WHERE false`, 0},
		{"one-row update", `UPDATE operations SET status = 'cancelled' WHERE key = 'k3'`, 2},
		{"delete from two states",
			`DELETE FROM operations WHERE status IN ('held', 'failed') AND key LIKE 'k1%'`, 2},
		{"fold then update", `WITH moved AS (DELETE FROM operation_count_deltas RETURNING tenant_id, scope, status, delta)
INSERT INTO operation_counts (tenant_id, scope, status, n)
SELECT tenant_id, scope, status, sum(delta) FROM moved GROUP BY tenant_id, scope, status
ON CONFLICT (tenant_id, scope, status) DO UPDATE SET n = operation_counts.n + EXCLUDED.n`, -1},
		{"update after the fold", `UPDATE operations SET status = 'review', review_reason = 'r', review_owner = 'ops'
             WHERE status = 'held'`, 2},
		{"truncate starts again", `TRUNCATE operations CASCADE`, -1},
	} {
		before := f.count(t, deltasCount)
		if step.sql != "" {
			if _, err := f.pool.Exec(ctx, step.sql); err != nil {
				t.Fatalf("%s: %v", step.name, err)
			}
		}
		if got, want := f.counts(t, countsKept), f.counts(t, countsTrue); !maps.Equal(got, want) {
			t.Errorf("%s: kept counts %v, want %v", step.name, got, want)
		}
		if step.wantDeltas >= 0 && step.sql != "" {
			if got := f.count(t, deltasCount) - before; got != step.wantDeltas {
				t.Errorf("%s: appended %d delta rows, want %d", step.name, got, step.wantDeltas)
			}
		}
	}

	f.insert(t, 1, 30)
	if got, want := f.counts(t, countsKept), f.counts(t, countsTrue); !maps.Equal(got, want) {
		t.Errorf("insert after truncate: kept counts %v, want %v", got, want)
	}
	f.insert(t, 1, 60) // k1…k30 exist: only k31…k60 are inserted
	if got, want := f.counts(t, countsKept), f.counts(t, countsTrue); !maps.Equal(got, want) {
		t.Errorf("insert with conflicts: kept counts %v, want %v", got, want)
	}
}

func (f fixture) count(t *testing.T, query string) int {
	t.Helper()
	var n int
	if err := f.pool.QueryRow(context.Background(), query).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// operationChannel is ledger.OperationChannel (schema cannot import ledger:
// ledger's tests use testdb, which imports schema).
const operationChannel = "actledger_operation"

// TestMultiRowUpdatesNotifyOnlyWatchedOperations: a statement that moves
// the version of many operations notifies each watched one once, however
// many watchers it has, and none of the others; a statement that leaves
// versions alone notifies nobody; two statements of one transaction that
// move the same watched operation notify it once (Postgres folds repeats
// of a payload within a transaction). Notifications arrive in commit
// order, so what arrives before a marker sent after a step is that step's.
func TestMultiRowUpdatesNotifyOnlyWatchedOperations(t *testing.T) {
	t.Parallel()
	f := setup(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	f.insert(t, 1, 20)
	var watchedA, watchedB uuid.UUID
	if err := f.pool.QueryRow(ctx, `SELECT
        (SELECT id FROM operations WHERE key = 'k3'), (SELECT id FROM operations WHERE key = 'k7')`).Scan(&watchedA, &watchedB); err != nil {
		t.Fatal(err)
	}
	if _, err := f.pool.Exec(ctx, `INSERT INTO operation_watches (operation_id, watcher)
        VALUES ($1, gen_random_uuid()), ($1, gen_random_uuid()), ($2, gen_random_uuid())`, watchedA, watchedB); err != nil {
		t.Fatal(err)
	}

	listener, err := f.pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer listener.Release()
	defer listener.Conn().PgConn().Close(context.Background())
	if _, err := listener.Exec(ctx, "LISTEN "+operationChannel); err != nil {
		t.Fatal(err)
	}

	both := []string{watchedA.String(), watchedB.String()}
	slices.Sort(both)
	for i, step := range []struct {
		name  string
		stmts []string // one transaction
		want  []string // payloads, sorted
	}{
		{"one update of every operation, two watched",
			[]string{`UPDATE operations SET version = version + 1, status = 'held' WHERE status = 'queued' OR key IN ('k3', 'k7')`}, both},
		{"update that moves no version",
			[]string{`UPDATE operations SET redispatches = redispatches + 1`}, nil},
		{"two updates of the same operations in one transaction",
			[]string{`UPDATE operations SET version = version + 1`, `UPDATE operations SET version = version + 1 WHERE key >= 'k3'`}, both},
		{"update of unwatched operations only",
			[]string{`UPDATE operations SET version = version + 1 WHERE key NOT IN ('k3', 'k7')`}, nil},
		{"update of one watched operation",
			[]string{`UPDATE operations SET version = version + 1 WHERE key = 'k7'`}, []string{watchedB.String()}},
	} {
		err := pgx.BeginFunc(ctx, f.pool, func(tx pgx.Tx) error {
			for _, s := range step.stmts {
				if _, err := tx.Exec(ctx, s); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			t.Fatalf("%s: %v", step.name, err)
		}
		marker := fmt.Sprintf("end-%d", i)
		if _, err := f.pool.Exec(ctx, `SELECT pg_notify($1, $2)`, operationChannel, marker); err != nil {
			t.Fatal(err)
		}
		var got []string
		for {
			n, err := listener.Conn().WaitForNotification(ctx)
			if err != nil {
				t.Fatalf("%s: %v", step.name, err)
			}
			if n.Payload == marker {
				break
			}
			got = append(got, n.Payload)
		}
		slices.Sort(got)
		if !slices.Equal(got, step.want) {
			t.Errorf("%s: notified %v, want %v", step.name, got, step.want)
		}
	}
}
