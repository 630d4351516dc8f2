package ledger_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/actledger/actledger/internal/testpoll"
	"github.com/actledger/actledger/ledger"
)

// TestEventOfAPrunedOperationIsNeverWritten: an event that changes nothing
// (AppendEvent) written while a prune deletes its operation waits for the
// prune and then writes nothing. Events have no foreign key to their
// operation (schema 036); the operation's row lock is what keeps an event
// from outliving it.
func TestEventOfAPrunedOperationIsNeverWritten(t *testing.T) {
	t.Parallel()
	f := setup(t)
	ctx := context.Background()
	op, _ := f.queued(t, "po-pruned", `{"sku":"A-1"}`)

	// The prune's transaction, as ledger.Prune runs it: the operation is
	// locked first, then its history and the row itself are deleted.
	prune, err := f.pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer prune.Rollback(ctx)
	var pid int
	if err := prune.QueryRow(ctx, `SELECT pg_backend_pid()`).Scan(&pid); err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{
		`SELECT id FROM operations WHERE id = $1 FOR UPDATE`,
		`SELECT set_config('actledger.prune', 'on', true) WHERE $1::uuid IS NOT NULL`,
		`DELETE FROM operation_events WHERE operation_id = $1`,
		`DELETE FROM operations WHERE id = $1`,
	} {
		if _, err := prune.Exec(ctx, q, op.ID); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}

	appended := make(chan error, 1)
	go func() {
		appended <- f.store.AppendEvent(ctx, op.ID, ledger.EventStaleResult, "worker:late", map[string]any{"late": true})
	}()
	// The append must wait for the prune's lock, not slip past it.
	testpoll.Until(t, 10*time.Second, func() error {
		select {
		case err := <-appended:
			t.Fatalf("the event was appended (%v) while the prune held its operation", err)
		default:
		}
		if f.count(t, `SELECT count(*) FROM pg_stat_activity WHERE $1::int = ANY (pg_blocking_pids(pid))`, pid) == 0 {
			return errors.New("the append never waited for the prune")
		}
		return nil
	})
	if err := prune.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-appended; !errors.Is(err, ledger.ErrNotFound) {
		t.Errorf("append after the prune: %v, want ErrNotFound", err)
	}
	if n := f.count(t, `SELECT count(*) FROM operation_events WHERE operation_id = $1`, op.ID); n != 0 {
		t.Errorf("%d events of the pruned operation, want 0", n)
	}
}
