package dispatcher_test

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/actledger/actledger/dispatcher"
	"github.com/actledger/actledger/internal/mocksupplier"
	"github.com/actledger/actledger/internal/testpipeline"
	"github.com/actledger/actledger/ledger"
)

// An operation whose dispatch message keeps getting lost is re-published
// at most once per sweep interval that doubles after each re-publish, and
// every re-publish is recorded.
func TestStuckOperationIsRepublishedWithADoublingBackoff(t *testing.T) {
	t.Parallel()
	p := testpipeline.New(t, testpipeline.Options{Idempotency: true, LookupLag: 0, Mode: mocksupplier.Honour})
	const interval = time.Second
	sweeper, err := dispatcher.NewLeaseSweeper(p.Store, p.Broker, dispatcher.SweeperConfig{
		Registry: p.Registry, Interval: interval, StuckAfter: time.Minute, Logger: slog.New(slog.DiscardHandler),
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	op := p.Enqueue("po-1", `{"sku":"A-1"}`)
	// messages is how many dispatch messages op has had; lose marks them
	// published and lost (no relay runs, so JetStream never sees them).
	messages := func() int {
		t.Helper()
		var n int
		if err := p.Pool.QueryRow(ctx, `SELECT count(*) FROM outbox WHERE msg_id LIKE 'dispatch.' || $1::text || '.%'`, op.ID).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	lose := func() {
		t.Helper()
		if _, err := p.Pool.Exec(ctx, `UPDATE outbox SET published_at = now() WHERE published_at IS NULL`); err != nil {
			t.Fatal(err)
		}
	}
	sweep := func() int {
		t.Helper()
		if err := sweeper.Sweep(ctx); err != nil {
			t.Fatal(err)
		}
		n := messages()
		lose()
		return n
	}
	lose()
	p.Clock.Advance(2 * time.Minute) // stuck since long ago

	steps := []struct {
		advance time.Duration
		want    int // messages so far, the first from the enqueue
	}{
		{0, 2},                               // stuck: re-published
		{0, 2},                               // the next sweep: not again
		{interval, 2},                        // one interval later: still waiting (2 intervals)
		{interval + 100*time.Millisecond, 3}, // past 2 intervals: again
		{3 * interval, 3},                    // waiting 4 intervals now
		{interval + 100*time.Millisecond, 4},
		{7 * interval, 4}, // then 8
		{interval + 100*time.Millisecond, 5},
	}
	for i, s := range steps {
		p.Clock.Advance(s.advance)
		if got := sweep(); got != s.want {
			t.Fatalf("step %d (+%s): %d dispatch messages, want %d", i, s.advance, got, s.want)
		}
	}
	events, err := p.Store.Events(context.Background(), ledger.WholeTenant(p.TenantID), op.ID)
	if err != nil {
		t.Fatal(err)
	}
	var kinds []string
	for _, e := range events {
		kinds = append(kinds, string(e.Kind))
	}
	if want := "created,redispatched,redispatched,redispatched,redispatched"; strings.Join(kinds, ",") != want {
		t.Errorf("events %s, want %s", kinds, want)
	}
	if got := p.Get(op); got.Status != ledger.StatusQueued {
		t.Errorf("status %s, want queued", got.Status)
	}
}

// A claim whose lease expired may have had a call in flight until the
// lease ended, not until the sweeper happened to look: lookups count the
// visibility lag from the lease end.
func TestExpiredLeaseCountsTheLeaseEndAsTheLastSend(t *testing.T) {
	t.Parallel()
	p := testpipeline.New(t, testpipeline.Options{LookupLag: 0, Mode: mocksupplier.Ignore})
	sweeper, err := dispatcher.NewLeaseSweeper(p.Store, p.Broker, dispatcher.SweeperConfig{
		Registry: p.Registry, Logger: slog.New(slog.DiscardHandler),
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	op := p.Enqueue("po-1", `{"sku":"A-1"}`)
	claimed, _, err := p.Store.Claim(ctx, ledger.Change{ID: op.ID, From: op.Status, Version: op.Version, To: ledger.StatusDispatching,
		Kind: "claimed", Actor: "worker:gone", LeaseOwner: "gone", LeaseUntil: p.Clock.Now().Add(2 * time.Second)}, testpipeline.DefaultTarget)
	if err != nil {
		t.Fatal(err)
	}
	p.Clock.Advance(time.Hour) // the sweeper looks long after the lease ended
	if err := sweeper.Sweep(ctx); err != nil {
		t.Fatal(err)
	}
	got := p.Get(op)
	if got.Status != ledger.StatusUnknown || got.LastSentAt == nil || !got.LastSentAt.Equal(*claimed.LeaseExpiresAt) {
		t.Errorf("status %s, last send %v; want unknown, last send at the lease end %s", got.Status, got.LastSentAt, claimed.LeaseExpiresAt)
	}
}
