package ledger_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

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

// Concurrent enqueues share one enqueue_operations statement when every
// one of them creates its operation, and otherwise run one by one; either
// way each caller gets the answer it would have got alone.
func TestGroupedEnqueuesAnswerEachAsAloneWould(t *testing.T) {
	t.Parallel()
	f := setup(t)
	const params = `{"sku":"A-1"}`
	scarce := f.approve(t, params, 5)
	plenty := f.approve(t, params, 100)
	existing, _, err := f.enqueue("po-existing", params, plenty.ID)
	if err != nil {
		t.Fatal(err)
	}

	type answer struct {
		key      string
		op       ledger.Operation
		replayed bool
		err      error
	}
	var (
		mu      sync.Mutex
		answers []answer
		wg      sync.WaitGroup
	)
	send := func(key string, approval ledger.Approval) {
		wg.Go(func() {
			op, replayed, err := f.enqueue(key, params, approval.ID)
			mu.Lock()
			answers = append(answers, answer{key, op, replayed, err})
			mu.Unlock()
		})
	}
	// Only new keys under approvals with uses to spare: shared statements.
	for i := range 20 {
		send(fmt.Sprintf("fresh-%d", i), plenty)
	}
	wg.Wait()
	// New keys, existing keys and an approval that runs out: one by one.
	for i := range 10 {
		send(fmt.Sprintf("scarce-%d", i), scarce)
	}
	for i := range 20 {
		send(fmt.Sprintf("plenty-%d", i), plenty)
	}
	for range 5 {
		send("po-existing", plenty)
	}
	wg.Wait()

	created, used, replays := 0, 0, 0
	ids := make(map[uuid.UUID]bool)
	for _, a := range answers {
		var ae *ledger.ApprovalError
		switch {
		case a.err == nil && a.replayed:
			replays++
			if a.op.ID != existing.ID {
				t.Errorf("replay of %s answered %s, want %s", a.key, a.op.ID, existing.ID)
			}
		case a.err == nil:
			created++
			if a.op.Key != a.key || a.op.Tenant != "acme-corp" || a.op.CreatedAt.IsZero() || a.op.Status != ledger.StatusQueued || ids[a.op.ID] {
				t.Errorf("created %s: %+v", a.key, a.op)
			}
			if want := "approver:" + f.approver.Name; a.op.ApprovedBy == nil || *a.op.ApprovedBy != want {
				t.Errorf("created %s approved by %v, want %s", a.key, a.op.ApprovedBy, want)
			}
			ids[a.op.ID] = true
		case errors.As(a.err, &ae) && ae.Code == ledger.ApprovalUsed:
			used++
		default:
			t.Errorf("%s: %v", a.key, a.err)
		}
	}
	if created != 45 || used != 5 || replays != 5 {
		t.Errorf("created %d, approval_used %d, replayed %d; want 45, 5, 5", created, used, replays)
	}
	if n := f.count(t, `SELECT uses FROM approvals WHERE id = $1`, scarce.ID); n != 5 {
		t.Errorf("scarce approval uses = %d, want 5", n)
	}
	if n := f.count(t, `SELECT uses FROM approvals WHERE id = $1`, plenty.ID); n != 41 {
		t.Errorf("plenty approval uses = %d, want 41", n)
	}
	if n := f.count(t, `SELECT count(*) FROM outbox`); n != 46 {
		t.Errorf("outbox rows = %d, want 46 (one per operation)", n)
	}
	if n := f.count(t, `SELECT count(*) FROM operation_events WHERE kind = 'created'`); n != 46 {
		t.Errorf("created events = %d, want 46", n)
	}
}
