package ledger_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/actledger/actledger/ledger"
)

// Concurrent claims and results share round trips and commits; this proves
// that sharing changes nothing a caller can see: each operation is claimed
// by exactly one of the workers racing for it, every result is committed,
// and a write that fails fails alone.
func TestSharedCommitsKeepEveryWriteItsOwnOutcome(t *testing.T) {
	t.Parallel()
	f := setup(t)
	ctx := context.Background()
	const ops, racers = 40, 3
	var queued []ledger.Operation
	for i := range ops {
		params := fmt.Sprintf(`{"sku":"A-%d"}`, i)
		op, _, err := f.enqueue(fmt.Sprintf("po-%d", i), params, f.approve(t, params, 1).ID)
		if err != nil {
			t.Fatal(err)
		}
		queued = append(queued, op)
	}

	var (
		mu      sync.Mutex
		claims  = make(map[string]int)
		claimed []ledger.Operation
		wg      sync.WaitGroup
	)
	for _, op := range queued {
		for r := range racers {
			wg.Go(func() {
				got, lapse, err := f.store.Claim(ctx, ledger.Change{
					ID: op.ID, From: ledger.StatusQueued, Version: op.Version, To: ledger.StatusDispatching,
					Kind: "claimed", Actor: fmt.Sprintf("worker:%d", r), LeaseOwner: fmt.Sprint(r), LeaseUntil: time.Now().Add(time.Minute),
				}, testTarget)
				if errors.Is(err, ledger.ErrStale) {
					return
				}
				if err != nil || lapse != ledger.LapseNone {
					t.Errorf("claim %s: lapse %q, err %v", op.ID, lapse, err)
					return
				}
				mu.Lock()
				claims[op.ID.String()]++
				claimed = append(claimed, got)
				mu.Unlock()
			})
		}
	}
	wg.Wait()
	if len(claims) != ops || len(claimed) != ops {
		t.Fatalf("%d operations claimed %d times, want %d once each", len(claims), len(claimed), ops)
	}

	// Record every result at once; one of them cannot be stored (Postgres
	// refuses a NUL byte in text) and must fail without taking the others
	// with it.
	bad := claimed[ops/2].ID
	errs := make(map[string]error)
	for _, op := range claimed {
		wg.Go(func() {
			kind := ledger.EventKind("provider_answered")
			if op.ID == bad {
				kind = "bad\x00kind"
			}
			_, err := f.store.Record(ctx, ledger.Change{
				ID: op.ID, From: ledger.StatusDispatching, Version: op.Version, To: ledger.StatusSucceeded,
				Kind: kind, Actor: "worker", ProviderReference: "ord_" + op.ID.String(), Attempted: true, SentAt: time.Now(),
			})
			mu.Lock()
			errs[op.ID.String()] = err
			mu.Unlock()
		})
	}
	wg.Wait()
	for id, err := range errs {
		if (id == bad.String()) != (err != nil) {
			t.Errorf("operation %s (bad: %v): err = %v", id, id == bad.String(), err)
		}
	}
	if n := f.count(t, `SELECT count(*) FROM operations WHERE status = 'succeeded'`); n != ops-1 {
		t.Errorf("%d operations succeeded, want %d", n, ops-1)
	}
	if n := f.count(t, `SELECT count(*) FROM operations WHERE id = $1 AND status = 'dispatching'`, bad); n != 1 {
		t.Errorf("the failed write changed its operation")
	}
	if n := f.count(t, `SELECT count(*) FROM operation_events WHERE kind = 'claimed'`); n != ops {
		t.Errorf("%d claimed events, want %d", n, ops)
	}
}
