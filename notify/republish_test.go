package notify_test

import (
	"bytes"
	"context"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/actledger/actledger/broker"
	"github.com/actledger/actledger/internal/testnats"
	"github.com/actledger/actledger/internal/testpipeline"
	"github.com/actledger/actledger/internal/testreceiver"
	"github.com/actledger/actledger/notify"
)

// stallFast takes an event for lost two seconds after it happened, and looks
// every 100 ms.
var stallFast = func() (c notify.Config) {
	c = fastRetries
	c.StallAfter, c.SweepInterval, c.RepublishMaxBackoff = 2*time.Second, 100*time.Millisecond, time.Minute
	return c
}()

// logBuffer is a log sink that tests read while the process writes.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *logBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *logBuffer) lines(containing string) []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []string
	for _, l := range strings.Split(b.buf.String(), "\n") {
		if strings.Contains(l, containing) {
			out = append(out, l)
		}
	}
	return out
}

// sweepsPastTheStall moves the pipeline's clock by cfg's stall threshold
// and its longest re-publish backoff, past the moment any unfinished event
// would be taken for stalled, waits for n sweeps of stalled notifications
// that begin after the move, and then for the notifications to settle: a
// wrong re-publish, and what it would send, has happened by then.
func sweepsPastTheStall(t *testing.T, p *testpipeline.Pipeline, cfg notify.Config, n int) {
	t.Helper()
	p.Clock.Advance(cfg.StallAfter + cfg.RepublishMaxBackoff)
	swept := &p.Notifier.TestSignals.Swept
	swept.Clear()
	// A sweep under way while Clear ran may have read the clock before
	// the move: it is not one of the n.
	for range n + 1 {
		swept.WaitOrTimeout()
	}
	notificationsSettled(t, p)
}

// eventState is what the ledger says of one event: its re-publishes and
// whether it is settled.
func eventState(t *testing.T, p *testpipeline.Pipeline, id string) (republishes int, settled bool) {
	t.Helper()
	if err := p.Pool.QueryRow(context.Background(), `SELECT republishes, settled_at IS NOT NULL FROM notifications WHERE id = $1::uuid`, id).
		Scan(&republishes, &settled); err != nil {
		t.Fatal(err)
	}
	return republishes, settled
}

// TestApprovalRequestedLostFromTheStreamIsRepublishedAndDeliveredOnce: a
// proposal's approval.requested that the relay published and JetStream
// then lost (the stream purged while the worker was down) is published
// again by the worker's sweep once it stalled, and the receiver gets it
// exactly once, under the event's id as webhook-id, signed so that its own
// HMAC check verifies it; the re-publish is logged at WARN with the event,
// receiver and tenant, and the event ends settled, never published again.
func TestApprovalRequestedLostFromTheStreamIsRepublishedAndDeliveredOnce(t *testing.T) {
	t.Parallel()
	// A short duplicate window: the re-publish, seconds after the
	// event, comes after it, as twenty minutes come after two in
	// production.
	b := testnats.NewWith(t, broker.Config{Duplicates: 300 * time.Millisecond})
	logs := &logBuffer{}
	secret := testreceiver.Secret(t)
	rc := testreceiver.New(t, nil)
	opts := approvalsRelay(rc.URL, secret, stallFast)
	opts.Broker, opts.Logger = b, slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelWarn}))
	p := testpipeline.New(t, opts)
	p.Start(1)
	p.Notifier.Stop() // the receivers stay in the ledger; nothing delivers
	ctx := context.Background()

	status, out := p.Propose("po-lost", `{"sku":"A-1"}`)
	if status != http.StatusAccepted {
		t.Fatalf("propose: %d %v", status, out)
	}
	op := p.Operation(out)
	var eventID string
	if err := p.Pool.QueryRow(ctx, `SELECT id::text FROM notifications WHERE operation_id = $1`, op.ID).Scan(&eventID); err != nil {
		t.Fatal(err)
	}
	stream, err := b.JetStream().Stream(ctx, b.NotifyStream())
	if err != nil {
		t.Fatal(err)
	}
	p.Eventually(10*time.Second, "the relay to publish the event", func() bool {
		var due int
		if err := p.Pool.QueryRow(ctx, `SELECT count(*) FROM outbox WHERE msg_id = $1`, eventID).Scan(&due); err != nil || due > 0 {
			return false
		}
		info, err := stream.Info(ctx)
		return err == nil && info.State.Msgs == 1
	})
	if err := stream.Purge(ctx); err != nil { // JetStream loses the message
		t.Fatal(err)
	}
	if n := len(rc.Deliveries()); n != 0 {
		t.Fatalf("receiver got %d requests before the worker ran", n)
	}

	if err := p.Notifier.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Notifier.Stop)
	p.Eventually(15*time.Second, "the re-published event", func() bool { return len(rc.Deliveries()) > 0 })
	notificationsSettled(t, p)
	p.Eventually(5*time.Second, "the event to settle", func() bool { _, settled := eventState(t, p, eventID); return settled })
	// Past the stall threshold and several sweeps: a settled event is
	// not published again.
	sweepsPastTheStall(t, p, stallFast, 3)

	got := rc.Deliveries()
	if len(got) != 1 {
		t.Fatalf("receiver got %d requests, want exactly 1", len(got))
	}
	testreceiver.Verify(t, secret, got[0])
	if got[0].ID != eventID {
		t.Errorf("webhook-id %q, want the event's id %q", got[0].ID, eventID)
	}
	if e := got[0].Event(t); e.Type != "approval.requested" {
		t.Errorf("type %q, want approval.requested", e.Type)
	}
	if republishes, _ := eventState(t, p, eventID); republishes != 1 {
		t.Errorf("event re-published %d times, want 1", republishes)
	}
	warned := logs.lines("notification stalled; published again")
	if len(warned) != 1 {
		t.Fatalf("%d re-publish warnings, want 1: %v", len(warned), warned)
	}
	for _, want := range []string{`"level":"WARN"`, `"event_id":"` + eventID + `"`, `"receivers":["approvals-relay"]`, `"tenant":"Acme Corp."`} {
		if !strings.Contains(warned[0], want) {
			t.Errorf("re-publish warning lacks %s: %s", want, warned[0])
		}
	}
}

// TestDeliveredEventIsSettledAndNeverRepublished: an event delivered is
// settled by the worker; one delivered whose settlement was missed (two
// workers finishing at once) is settled by the sweep; neither is published
// again nor sent a second time, long past the stall threshold.
func TestDeliveredEventIsSettledAndNeverRepublished(t *testing.T) {
	t.Parallel()
	secret := testreceiver.Secret(t)
	rc := testreceiver.New(t, nil)
	p := testpipeline.New(t, approvalsRelay(rc.URL, secret, stallFast))
	p.Start(1)
	ctx := context.Background()
	status, out := p.Propose("po-delivered", `{"sku":"A-1"}`)
	if status != http.StatusAccepted {
		t.Fatalf("propose: %d %v", status, out)
	}
	p.Eventually(10*time.Second, "the approval.requested notification", func() bool { return len(rc.Deliveries()) > 0 })
	notificationsSettled(t, p)
	eventID := rc.Deliveries()[0].ID
	// The worker settles it as it records the delivery, well before the
	// sweep would take it (two seconds after the event).
	p.Eventually(5*time.Second, "the worker to settle the event", func() bool { _, settled := eventState(t, p, eventID); return settled })

	// The settlement missed: the sweep finds every receiver done.
	if _, err := p.Pool.Exec(ctx, `UPDATE notifications SET settled_at = NULL WHERE id = $1::uuid`, eventID); err != nil {
		t.Fatal(err)
	}
	p.Eventually(10*time.Second, "the sweep to settle the event", func() bool { _, settled := eventState(t, p, eventID); return settled })
	sweepsPastTheStall(t, p, stallFast, 3)

	if n := len(rc.Deliveries()); n != 1 {
		t.Errorf("receiver got %d requests, want exactly 1", n)
	}
	if republishes, _ := eventState(t, p, eventID); republishes != 0 {
		t.Errorf("a delivered event was re-published %d times", republishes)
	}
}

// TestRetryingReceiverIsNotTakenForStalledAndGivenUpEventSettles: a
// receiver that keeps failing is attempted again and again within the
// stall threshold, so its event is never published again while it
// retries; once the retry window is over it is given up, and the given-up
// event is settled, not re-published.
func TestRetryingReceiverIsNotTakenForStalledAndGivenUpEventSettles(t *testing.T) {
	t.Parallel()
	secret := testreceiver.Secret(t)
	rc := testreceiver.New(t, func(_ int, w http.ResponseWriter, _ *http.Request) {
		http.Error(w, "down", http.StatusServiceUnavailable)
	})
	cfg := stallFast
	cfg.RetryFor = 2 * cfg.StallAfter
	p := testpipeline.New(t, testpipeline.Options{
		Env:           map[string]string{"NOTIFY_SECRET": secret},
		Notifications: receiverYAML("down", rc.URL, "NOTIFY_SECRET", "Acme Corp.", "approval.requested"),
		Notify:        cfg,
	})
	p.Start(1)
	status, out := p.Propose("po-down", `{"sku":"A-1"}`)
	if status != http.StatusAccepted {
		t.Fatalf("propose: %d %v", status, out)
	}
	p.Eventually(10*time.Second, "a first attempt", func() bool { return len(rc.Deliveries()) > 0 })
	eventID := rc.Deliveries()[0].ID
	p.Eventually(20*time.Second, "the event to be given up and settled", func() bool {
		var givenUp bool
		err := p.Pool.QueryRow(context.Background(), `SELECT given_up_at IS NOT NULL FROM notification_deliveries
WHERE notification_id = $1::uuid AND receiver = 'down'`, eventID).Scan(&givenUp)
		_, settled := eventState(t, p, eventID)
		return err == nil && givenUp && settled
	})
	sweepsPastTheStall(t, p, cfg, 3)

	if republishes, _ := eventState(t, p, eventID); republishes != 0 {
		t.Errorf("an event retried within the stall threshold was re-published %d times", republishes)
	}
	sent := len(rc.Deliveries())
	if sent < 3 {
		t.Errorf("receiver got %d attempts in the retry window, want several", sent)
	}
	sweepsPastTheStall(t, p, cfg, 3)
	if n := len(rc.Deliveries()); n != sent {
		t.Errorf("a given-up event was sent again: %d attempts, then %d", sent, n)
	}
}
