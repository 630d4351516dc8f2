package ledger_test

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/actledger/actledger/internal/testdb"
	"github.com/actledger/actledger/ledger"
)

// TestOnlyWatchedOperationsNotify: a transition of an operation nobody
// waits on sends no notification (no notify-queue lock on the
// dispatcher's hot path); one of a watched operation does, and its
// waiter wakes. Notifications arrive in commit order, so the first one
// heard being the watched operation's proves the other sent none.
func TestOnlyWatchedOperationsNotify(t *testing.T) {
	t.Parallel()
	f := setup(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	a := f.approve(t, `{"sku":"A-1"}`, 2)
	unwatched, _, err := f.enqueue("po-1", `{"sku":"A-1"}`, a.ID)
	if err != nil {
		t.Fatal(err)
	}
	watched, _, err := f.enqueue("po-2", `{"sku":"A-1"}`, a.ID)
	if err != nil {
		t.Fatal(err)
	}
	listener, err := f.pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer listener.Release()
	defer listener.Conn().PgConn().Close(context.Background())
	if _, err := listener.Exec(ctx, "LISTEN "+ledger.OperationChannel); err != nil {
		t.Fatal(err)
	}

	watcher := ledger.NewWatcher(f.pool, slog.New(slog.DiscardHandler))
	if err := watcher.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer watcher.Stop()
	changed, stop, err := watcher.Watch(ctx, watched.ID)
	if err != nil {
		t.Fatal(err)
	}
	defer stop()

	for _, op := range []ledger.Operation{unwatched, watched} {
		if _, err := f.store.Transition(ctx, ledger.Change{
			ID: op.ID, From: ledger.StatusQueued, Version: op.Version, To: ledger.StatusHeld, Kind: "approval_revoked", Actor: "test",
		}); err != nil {
			t.Fatal(err)
		}
	}
	n, err := listener.Conn().WaitForNotification(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if n.Payload != watched.ID.String() {
		t.Errorf("first notification names %s, want the watched %s (the unwatched %s must not notify)", n.Payload, watched.ID, unwatched.ID)
	}
	select {
	case <-changed:
	case <-ctx.Done():
		t.Fatal("the watched operation's waiter was not woken")
	}
}

// TestWatcherWakesItsWaitersWhenItListensAgain: a change made while the
// watcher's connection is down notifies nobody; when the watcher listens
// again it registers its operations again and wakes every waiter to read
// again, so none waits on a stale belief.
func TestWatcherWakesItsWaitersWhenItListensAgain(t *testing.T) {
	t.Parallel()
	direct, dbURL := testdb.NewWithURL(t)
	proxied, proxy := testdb.PoolBehindProxy(t, dbURL)
	f := setupOn(t, direct)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	op, _ := f.queued(t, "po-1", `{"sku":"A-1"}`)

	watcher := ledger.NewWatcher(proxied, slog.New(slog.DiscardHandler))
	changed, stop, err := watcher.Watch(ctx, op.ID)
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	if err := watcher.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer watcher.Stop()
	select { // listening: it wakes its waiters as it starts
	case <-changed:
	case <-ctx.Done():
		t.Fatal("the watcher never listened")
	}

	proxy.Cut()
	if _, err := f.store.TransitionOn(ctx, direct, ledger.Change{
		ID: op.ID, From: ledger.StatusQueued, Version: op.Version, To: ledger.StatusHeld, Kind: "approval_revoked", Actor: "test",
	}); err != nil {
		t.Fatal(err)
	}
	proxy.Restore()
	select {
	case <-changed:
	case <-ctx.Done():
		t.Fatal("the waiter was not woken after the watcher listened again")
	}
}
