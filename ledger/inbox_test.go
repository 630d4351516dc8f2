package ledger_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/actledger/actledger/broker"
	"github.com/actledger/actledger/internal/testdb"
	"github.com/actledger/actledger/ledger"
)

// TestUnappliedEvidenceIsSweptOncePerBackoff: a webhook event still
// unapplied After its arrival is taken by the sweep, then not again
// before its backoff (After, doubled per sweep, capped), so evidence that
// cannot be applied yet is not retried every sweep.
func TestUnappliedEvidenceIsSweptOncePerBackoff(t *testing.T) {
	t.Parallel()
	pool := testdb.New(t)
	var offset atomic.Int64
	start := time.Now()
	store := ledger.New(pool, ledger.Config{Subjects: broker.Subjects{Prefix: "TEST"}, Now: func() time.Time { return start.Add(time.Duration(offset.Load())) }})
	ctx := context.Background()
	if _, err := store.StoreWebhook(ctx, ledger.WebhookEvent{Provider: "acme", EventID: "evt_1", Type: "order.created",
		Reference: "al_x", ProviderReference: "ord_1", Status: "succeeded", Payload: []byte(`{}`)}); err != nil {
		t.Fatal(err)
	}
	policy := ledger.SweepPolicy{After: 30 * time.Second, MaxBackoff: 5 * time.Minute, Limit: 10}
	sweepAt := func(at time.Duration) int {
		t.Helper()
		offset.Store(int64(at))
		evs, err := store.SweepWebhookEvents(ctx, policy)
		if err != nil {
			t.Fatal(err)
		}
		return len(evs)
	}
	steps := []struct {
		at   time.Duration
		want int
	}{
		{10 * time.Second, 0},  // its message may still come
		{31 * time.Second, 1},  // first sweep; next look at 31s+30s
		{32 * time.Second, 0},  // not every sweep
		{60 * time.Second, 0},  // not before the backoff
		{62 * time.Second, 1},  // second sweep; next look at 62s+60s
		{100 * time.Second, 0}, // the backoff doubled
		{123 * time.Second, 1},
	}
	for _, s := range steps {
		if got := sweepAt(s.at); got != s.want {
			t.Errorf("sweep at +%s took %d events, want %d", s.at, got, s.want)
		}
	}
	if err := store.MarkWebhookApplied(ctx, 1, "settled_succeeded"); err != nil {
		t.Fatal(err)
	}
	if got := sweepAt(time.Hour); got != 0 {
		t.Errorf("an applied event was swept again (%d)", got)
	}
}
