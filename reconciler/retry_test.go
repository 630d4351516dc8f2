package reconciler_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/actledger/actledger/internal/mocksupplier"
	"github.com/actledger/actledger/internal/testpipeline"
	"github.com/actledger/actledger/ledger"
	"github.com/actledger/actledger/reconciler"
)

// failWith records, straight in the ledger, the attempts of op as a worker
// would (each under its own claim) and ends it failed by the last one's
// definite refusal.
func failWith(t *testing.T, p *testpipeline.Pipeline, op ledger.Operation, classes ...string) ledger.Operation {
	t.Helper()
	ctx := context.Background()
	cur := op
	for i, class := range classes {
		claimed, _, err := p.Store.Claim(ctx, ledger.Change{ID: cur.ID, From: cur.Status, Version: cur.Version, To: ledger.StatusDispatching,
			Kind: "claimed", Actor: "worker:test", LeaseOwner: "test", LeaseUntil: p.Clock.Now().Add(time.Minute)}, testpipeline.DefaultTarget)
		if err != nil {
			t.Fatal(err)
		}
		to := ledger.StatusUnknown
		if i == len(classes)-1 {
			to = ledger.StatusFailed
		}
		now := p.Clock.Now()
		cur, err = p.Store.Record(ctx, ledger.Change{ID: claimed.ID, From: claimed.Status, Version: claimed.Version, To: to,
			Kind: "attempt", Actor: "worker:test", Attempted: true, SentAt: now,
			Detail: map[string]any{"attempt": i + 1, "class": class, "sent": true}})
		if err != nil {
			t.Fatal(err)
		}
	}
	return cur
}

func TestOperatorRetryOfAFailureAfterAnUnknownOutcomeIsRefused(t *testing.T) {
	t.Parallel()
	p := testpipeline.New(t, testpipeline.Options{Idempotency: true, LookupLag: -1, Mode: mocksupplier.Honour})
	// The first create's answer was lost; the resend was refused (401).
	risky := failWith(t, p, p.Enqueue("po-1", `{"sku":"A-1"}`), "unknown", "rejected")
	// Control: refused the first time, nothing else ever sent.
	plain := failWith(t, p, p.Enqueue("po-2", `{"sku":"A-2"}`), "rejected")

	if _, err := p.Reconciler.Retry(context.Background(), ledger.WholeTenant(p.TenantID), "operator:test", risky.ID, "try again"); !errors.Is(err, reconciler.ErrRetryNotAllowed) {
		t.Errorf("retry after an unknown outcome: err = %v, want ErrRetryNotAllowed", err)
	}
	if got := p.Get(risky); got.Status != ledger.StatusFailed {
		t.Errorf("status %s, want failed (untouched)", got.Status)
	}
	if got, err := p.Reconciler.Retry(context.Background(), ledger.WholeTenant(p.TenantID), "operator:test", plain.ID, "try again"); err != nil || got.Status != ledger.StatusQueued {
		t.Errorf("retry of a plain refusal: %s, %v; want queued", got.Status, err)
	}
}
