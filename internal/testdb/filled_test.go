package testdb_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/actledger/actledger/internal/testdb"
)

// Tests of one server share one fill: the copies hold its rows, and what
// a test writes into its copy reaches neither the template nor another
// copy.
func TestFilledDatabaseIsFilledOnceAndEachTestWritesItsOwnCopy(t *testing.T) {
	// A key of this run only, so that the fill happens here and is
	// counted; its template is dropped when the test ends.
	key := "testdb test " + uuid.NewString()
	t.Cleanup(func() {
		if err := testdb.DropFilled(context.Background(), key); err != nil {
			t.Error(err)
		}
	})
	var fills atomic.Int32
	fill := func(ctx context.Context, pool *pgxpool.Pool) error {
		fills.Add(1)
		_, err := pool.Exec(ctx, `INSERT INTO tenants (id, name) SELECT gen_random_uuid(), 'filled-' || g FROM generate_series(1, 50) g`)
		return err
	}
	names := make([]string, 3)
	for i := range names {
		t.Run(fmt.Sprintf("copy-%d", i), func(t *testing.T) {
			pool := testdb.NewFilled(t, key, fill)
			names[i] = databaseName(t, pool)
			var tenants int
			if err := pool.QueryRow(context.Background(), `SELECT count(*) FROM tenants`).Scan(&tenants); err != nil {
				t.Fatal(err)
			}
			if tenants != 50 {
				t.Errorf("copy holds %d tenants, want the fill's 50", tenants)
			}
			if _, err := pool.Exec(context.Background(), `INSERT INTO tenants (id, name) VALUES (gen_random_uuid(), 'mine')`); err != nil {
				t.Fatal(err)
			}
		})
	}
	if got := fills.Load(); got != 1 {
		t.Errorf("filled %d times, want once", got)
	}
	if names[0] == names[1] || names[1] == names[2] || names[0] == names[2] {
		t.Errorf("copies %v: want a database of its own per test", names)
	}
}
