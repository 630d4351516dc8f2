package testdb_test

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/actledger/actledger/internal/testdb"
)

func TestMain(m *testing.M) { testdb.Main(m) }

// These tests do not run in parallel: each hands a database to the free
// list and expects the next test of the process to get it back.

func TestReusedDatabaseIsEmptiedWithItsSequencesRestarted(t *testing.T) {
	var first string
	t.Run("writes", func(t *testing.T) {
		pool := testdb.New(t)
		first = databaseName(t, pool)
		if got := insertOutboxRow(t, pool); got != 1 {
			t.Fatalf("first outbox id = %d, want 1", got)
		}
		insertOutboxRow(t, pool)
		// A row another references: emptying deletes both, whatever
		// the order of the tables.
		if _, err := pool.Exec(context.Background(), `WITH t AS (INSERT INTO tenants (id, name) VALUES (gen_random_uuid(), 'acme') RETURNING id)
			INSERT INTO api_tokens (id, tenant_id, name, role, token_hash) SELECT gen_random_uuid(), id, 'acme-agent', 'agent', '\x01' FROM t`); err != nil {
			t.Fatal(err)
		}
		// An insert the CHECK refuses draws its id and writes no page:
		// the table stays empty on disk, its sequence has moved.
		if _, err := pool.Exec(context.Background(), `INSERT INTO stale_results (operation_id, provider, provider_reference, worker)
			VALUES (gen_random_uuid(), 'p', '', 'w')`); err == nil {
			t.Fatal("an empty provider_reference was accepted")
		}
		var pages int64
		if err := pool.QueryRow(context.Background(), `SELECT pg_relation_size('stale_results')`).Scan(&pages); err != nil {
			t.Fatal(err)
		}
		if pages != 0 {
			t.Fatalf("stale_results holds %d bytes after a refused insert, want none", pages)
		}
	})
	t.Run("reuses", func(t *testing.T) {
		pool := testdb.New(t)
		if got := databaseName(t, pool); got != first {
			t.Fatalf("database = %s, want the emptied %s", got, first)
		}
		var rows int
		if err := pool.QueryRow(context.Background(), `SELECT count(*) FROM outbox`).Scan(&rows); err != nil {
			t.Fatal(err)
		}
		if rows != 0 {
			t.Errorf("outbox holds %d rows of the earlier test, want 0", rows)
		}
		if got := insertOutboxRow(t, pool); got != 1 {
			t.Errorf("outbox id = %d, want 1: the sequence restarted", got)
		}
		var tenants, tokens int
		if err := pool.QueryRow(context.Background(), `SELECT (SELECT count(*) FROM tenants), (SELECT count(*) FROM api_tokens)`).Scan(&tenants, &tokens); err != nil {
			t.Fatal(err)
		}
		if tenants != 0 || tokens != 0 {
			t.Errorf("%d tenants and %d tokens of the earlier test are left, want none", tenants, tokens)
		}
		var staleID int64
		if err := pool.QueryRow(context.Background(), `SELECT nextval('stale_results_id_seq')`).Scan(&staleID); err != nil {
			t.Fatal(err)
		}
		if staleID != 1 {
			t.Errorf("stale_results id = %d, want 1: the sequence a refused insert drew from restarted", staleID)
		}
		var migrations int
		if err := pool.QueryRow(context.Background(), `SELECT count(*) FROM schema_migrations`).Scan(&migrations); err != nil {
			t.Fatal(err)
		}
		if migrations == 0 {
			t.Error("schema_migrations was emptied with the test's rows")
		}
	})
}

// What a test's rows taught the planner does not reach the next test:
// the reused database's statistics are the template's (none, a table
// never analyzed), or a test of a plan reads the ended test's data.
func TestReusedDatabaseHasTheTemplatesStatistics(t *testing.T) {
	var first string
	t.Run("analyzes", func(t *testing.T) {
		pool := testdb.New(t)
		first = databaseName(t, pool)
		for range 50 {
			insertOutboxRow(t, pool)
		}
		if _, err := pool.Exec(context.Background(), `ANALYZE outbox`); err != nil {
			t.Fatal(err)
		}
		if stats, tuples := outboxStatistics(t, pool); stats == 0 || tuples != 50 {
			t.Fatalf("after ANALYZE: %d statistics rows, %v tuples; want some and 50", stats, tuples)
		}
	})
	t.Run("reuses", func(t *testing.T) {
		pool := testdb.New(t)
		if got := databaseName(t, pool); got != first {
			t.Fatalf("database = %s, want the emptied %s", got, first)
		}
		if stats, tuples := outboxStatistics(t, pool); stats != 0 || tuples != -1 {
			t.Errorf("reused: %d statistics rows, %v tuples; want none and -1 (never analyzed), as in the template", stats, tuples)
		}
	})
}

// outboxStatistics counts the planner's statistics rows of outbox and
// reads its row count estimate.
func outboxStatistics(t *testing.T, pool *pgxpool.Pool) (stats int, tuples float32) {
	t.Helper()
	err := pool.QueryRow(context.Background(), `SELECT
		(SELECT count(*) FROM pg_statistic WHERE starelid = 'outbox'::regclass),
		(SELECT reltuples FROM pg_class WHERE oid = 'outbox'::regclass)`).Scan(&stats, &tuples)
	if err != nil {
		t.Fatal(err)
	}
	return stats, tuples
}

func TestDatabaseWhoseSchemaATestChangedIsDroppedNotReused(t *testing.T) {
	var changed string
	t.Run("alters", func(t *testing.T) {
		pool := testdb.New(t)
		changed = databaseName(t, pool)
		if _, err := pool.Exec(context.Background(), `ALTER TABLE outbox ADD COLUMN note text`); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("gets another", func(t *testing.T) {
		pool := testdb.New(t)
		if got := databaseName(t, pool); got == changed {
			t.Fatalf("got %s again, whose outbox a test altered", got)
		}
		var exists bool
		if err := pool.QueryRow(context.Background(), `SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = $1)`, changed).Scan(&exists); err != nil {
			t.Fatal(err)
		}
		if exists {
			t.Errorf("%s still exists, want it dropped", changed)
		}
	})
}

func databaseName(t *testing.T, pool *pgxpool.Pool) string {
	t.Helper()
	var name string
	if err := pool.QueryRow(context.Background(), `SELECT current_database()`).Scan(&name); err != nil {
		t.Fatal(err)
	}
	return name
}

func insertOutboxRow(t *testing.T, pool *pgxpool.Pool) int64 {
	t.Helper()
	var id int64
	err := pool.QueryRow(context.Background(),
		`INSERT INTO outbox (subject, msg_id, payload) VALUES ('s', gen_random_uuid()::text, '{}') RETURNING id`).Scan(&id)
	if err != nil {
		t.Fatal(err)
	}
	return id
}
