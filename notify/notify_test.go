package notify_test

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/actledger/actledger/auth"
	"github.com/actledger/actledger/internal/mocksupplier"
	"github.com/actledger/actledger/internal/testpipeline"
	"github.com/actledger/actledger/internal/testreceiver"
	"github.com/actledger/actledger/ledger"
	"github.com/actledger/actledger/notify"
	"github.com/actledger/actledger/webhook"
)

const consoleURL = "https://actledger.acme.example/console"

// receiverYAML is one receiver of the providers file's notifications.
func receiverYAML(name, url, secretEnv, tenant string, events ...string) string {
	return fmt.Sprintf("  %s:\n    url: %s\n    secret_env: %s\n    tenant: %q\n    events: [%s]\n",
		name, url, secretEnv, tenant, strings.Join(events, ", "))
}

// approvalsRelay is a pipeline's options with one receiver,
// approvals-relay at url, of the tenant's approval requests, signed with
// secret (from NOTIFY_SECRET), its worker configured by cfg.
func approvalsRelay(url, secret string, cfg notify.Config) testpipeline.Options {
	return testpipeline.Options{
		Env:           map[string]string{"NOTIFY_SECRET": secret},
		Notifications: receiverYAML("approvals-relay", url, "NOTIFY_SECRET", "Acme Corp.", "approval.requested"),
		Notify:        cfg,
	}
}

// fastRetries makes a failed attempt come back within a fraction of a
// second.
var fastRetries = notify.Config{ConsoleURL: consoleURL, BackoffInitial: 50 * time.Millisecond, BackoffMax: 200 * time.Millisecond, Timeout: 2 * time.Second}

// notificationsSettled waits for the pipeline's notifications to be
// delivered and acknowledged (testpipeline.Pipeline.NotificationsSettled).
func notificationsSettled(t *testing.T, p *testpipeline.Pipeline) {
	t.Helper()
	p.NotificationsSettled(20 * time.Second)
}

// TestProposalSendsOneApprovalRequestedWhoseSignatureVerifies: an agent's
// proposal over HTTP reaches the receiver as exactly one
// approval.requested, signed so that a receiver's own HMAC check (not the
// product's signer) verifies it, whose webhook-id is the event's id in the
// ledger, and whose body holds ids and words, never the params.
func TestProposalSendsOneApprovalRequestedWhoseSignatureVerifies(t *testing.T) {
	t.Parallel()
	secret := testreceiver.Secret(t)
	rc := testreceiver.New(t, nil)
	p := testpipeline.New(t, approvalsRelay(rc.URL, secret, fastRetries))
	p.Start(1)
	status, out := p.Propose("po-37", `{"sku":"SKU-PRIVATE-991","qty":3}`)
	if status != http.StatusAccepted {
		t.Fatalf("propose: %d %v", status, out)
	}
	op := p.Operation(out)
	p.Eventually(10*time.Second, "the approval.requested notification", func() bool { return len(rc.Deliveries()) > 0 })
	notificationsSettled(t, p)

	got := rc.Deliveries()
	if len(got) != 1 {
		t.Fatalf("receiver got %d requests, want exactly 1: %v", len(got), got)
	}
	d := got[0]
	testreceiver.Verify(t, secret, d)
	var eventID string
	if err := p.Pool.QueryRow(context.Background(), `SELECT id::text FROM notifications WHERE operation_id = $1`, op.ID).Scan(&eventID); err != nil {
		t.Fatal(err)
	}
	if d.ID != eventID {
		t.Errorf("webhook-id %q, want the event's id %q", d.ID, eventID)
	}
	e := d.Event(t)
	if e.Type != "approval.requested" {
		t.Errorf("type %q, want approval.requested", e.Type)
	}
	if _, err := time.Parse(time.RFC3339Nano, e.Timestamp); err != nil {
		t.Errorf("timestamp %q is not RFC 3339: %v", e.Timestamp, err)
	}
	want := map[string]any{
		"operation_id": op.ID.String(), "action": testpipeline.Action, "status": "awaiting_approval",
		"summary": op.Summary(), "scope": nil, "console_url": consoleURL + "/operations/" + op.ID.String(),
	}
	if fmt.Sprint(e.Data) != fmt.Sprint(want) {
		t.Errorf("data %v,\nwant %v", e.Data, want)
	}
	if strings.Contains(string(d.Body), "SKU-PRIVATE") || strings.Contains(string(d.Body), "params") {
		t.Errorf("the body carries the params: %s", d.Body)
	}
}

// TestReceiverFailingThreeTimesGetsOneEventUnderOneWebhookID: a receiver
// that answers 500 three times and then 200 is sent the event four times,
// every time under the same webhook-id and each signed for its own
// timestamp; after dropping repeats by webhook-id it has exactly one event,
// and the ledger records one delivery after four attempts.
func TestReceiverFailingThreeTimesGetsOneEventUnderOneWebhookID(t *testing.T) {
	t.Parallel()
	secret := testreceiver.Secret(t)
	rc := testreceiver.New(t, func(n int, w http.ResponseWriter, _ *http.Request) {
		if n <= 3 {
			http.Error(w, "not now", http.StatusInternalServerError)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	})
	p := testpipeline.New(t, testpipeline.Options{
		Env:           map[string]string{"NOTIFY_SECRET": secret},
		Notifications: receiverYAML("flaky", rc.URL, "NOTIFY_SECRET", "Acme Corp.", "approval.requested"),
		Notify:        fastRetries,
	})
	p.Start(1)
	status, out := p.Propose("po-38", `{"sku":"A-1"}`)
	if status != http.StatusAccepted {
		t.Fatalf("propose: %d %v", status, out)
	}
	p.Eventually(15*time.Second, "four attempts", func() bool { return len(rc.Deliveries()) >= 4 })
	notificationsSettled(t, p)

	got := rc.Deliveries()
	if len(got) != 4 {
		t.Fatalf("receiver got %d requests, want 4 (three 500s, then the 2xx)", len(got))
	}
	for i, d := range got {
		if d.ID != got[0].ID {
			t.Errorf("attempt %d has webhook-id %q, want %q as on the first", i+1, d.ID, got[0].ID)
		}
		testreceiver.Verify(t, secret, d)
	}
	if n := len(rc.Distinct()); n != 1 {
		t.Errorf("%d events after dropping repeats, want 1", n)
	}
	var attempts int
	var delivered bool
	if err := p.Pool.QueryRow(context.Background(), `SELECT attempts, delivered_at IS NOT NULL FROM notification_deliveries
WHERE receiver = 'flaky' AND notification_id = $1::uuid`, got[0].ID).Scan(&attempts, &delivered); err != nil {
		t.Fatal(err)
	}
	if attempts != 4 || !delivered {
		t.Errorf("ledger records %d attempts, delivered %v; want 4 and delivered", attempts, delivered)
	}
}

// TestEventsFireForTheirStatesForTheReceiversTenantAndEventsOnly: each
// receiver hears its own tenant's events of the types it takes, and no
// other: operation.settled for succeeded, failed and cancelled (a denied
// proposal), review.opened for an operation in review and for evidence
// that matches no operation, approval.requested for a proposal; another
// tenant's proposal reaches only that tenant's receiver.
func TestEventsFireForTheirStatesForTheReceiversTenantAndEventsOnly(t *testing.T) {
	t.Parallel()
	secret := testreceiver.Secret(t)
	ops, approvals, other := testreceiver.New(t, nil), testreceiver.New(t, nil), testreceiver.New(t, nil)
	p := testpipeline.New(t, testpipeline.Options{
		MaxAttempts: 1,
		Env:         map[string]string{"NOTIFY_SECRET": secret},
		Notifications: receiverYAML("ops", ops.URL, "NOTIFY_SECRET", "Acme Corp.", "review.opened", "operation.settled") +
			receiverYAML("approvals", approvals.URL, "NOTIFY_SECRET", "Acme Corp.", "approval.requested") +
			receiverYAML("other-tenant", other.URL, "NOTIFY_SECRET", "Other Corp.", "approval.requested", "review.opened", "operation.settled"),
		Notify: fastRetries,
	})
	ok := p.Enqueue("po-ok", `{"sku":"A-1"}`)
	refused := p.Enqueue("po-refused", `{"sku":"A-2"}`)
	p.Supplier.SetFaults(refused.ExternalKey, mocksupplier.Fault{Kind: mocksupplier.Reject422})
	stuck := p.Enqueue("po-stuck", `{"sku":"A-3"}`)
	p.Supplier.SetFaults(stuck.ExternalKey, mocksupplier.Fault{Kind: mocksupplier.UnavailableBeforeCommit})
	p.Start(1)
	p.WaitStatus(ok, ledger.StatusSucceeded, 10*time.Second)
	p.WaitStatus(refused, ledger.StatusFailed, 10*time.Second)
	p.WaitStatus(stuck, ledger.StatusReview, 10*time.Second)

	status, out := p.Propose("po-ask", `{"sku":"A-4"}`)
	if status != http.StatusAccepted {
		t.Fatalf("propose: %d %v", status, out)
	}
	asked := p.Operation(out)
	if status, out := p.Do("POST", "/v1/operations/"+asked.ID.String()+"/deny", p.Approver, `{"reason":"not this month"}`); status != http.StatusOK {
		t.Fatalf("deny: %d %v", status, out)
	}
	otherAgent := p.TokenFor("Other Corp.", auth.RoleAgent)
	if status, out := p.Do("POST", "/v1/operations", otherAgent,
		fmt.Sprintf(`{"action":%q,"key":"po-elsewhere","params":{"sku":"B-1"},"request_approval":true}`, testpipeline.Action)); status != http.StatusAccepted {
		t.Fatalf("other tenant's proposal: %d %v", status, out)
	}
	sendUnmatchedWebhook(t, p)
	p.Eventually(10*time.Second, "the unmatched evidence's notification", func() bool {
		for _, d := range ops.Deliveries() {
			if d.Event(t).Data["evidence_id"] != nil {
				return true
			}
		}
		return false
	})
	notificationsSettled(t, p)

	heard := func(rc *testreceiver.Receiver) []string {
		var out []string
		for _, d := range rc.Distinct() {
			testreceiver.Verify(t, secret, d)
			e := d.Event(t)
			var what string
			switch e.Data["operation_id"] {
			case ok.ID.String():
				what = "po-ok"
			case refused.ID.String():
				what = "po-refused"
			case stuck.ID.String():
				what = "po-stuck"
			case asked.ID.String():
				what = "po-ask"
			case nil:
				what = "evidence"
			default:
				what = "another operation"
			}
			out = append(out, fmt.Sprintf("%s %s %v", e.Type, what, e.Data["status"]))
		}
		sort.Strings(out)
		return out
	}
	for _, tt := range []struct {
		name string
		rc   *testreceiver.Receiver
		want []string
	}{
		{"ops", ops, []string{
			"operation.settled po-ask cancelled", "operation.settled po-ok succeeded", "operation.settled po-refused failed",
			"review.opened evidence review", "review.opened po-stuck review",
		}},
		{"approvals", approvals, []string{"approval.requested po-ask awaiting_approval"}},
		{"other-tenant", other, []string{"approval.requested another operation awaiting_approval"}},
	} {
		if got := heard(tt.rc); !slices.Equal(got, tt.want) {
			t.Errorf("receiver %s heard\n  %s\nwant\n  %s", tt.name, strings.Join(got, "\n  "), strings.Join(tt.want, "\n  "))
		}
	}
}

// TestWithoutReceiversNothingIsWritten: a deployment whose providers file
// has no notifications writes no notification and publishes nothing on
// the notification stream, whatever its operations do.
func TestWithoutReceiversNothingIsWritten(t *testing.T) {
	t.Parallel()
	p := testpipeline.New(t, testpipeline.Options{})
	op := p.Enqueue("po-1", `{"sku":"A-1"}`)
	p.Start(1)
	p.WaitStatus(op, ledger.StatusSucceeded, 10*time.Second)
	if status, out := p.Propose("po-2", `{"sku":"A-2"}`); status != http.StatusAccepted {
		t.Fatalf("propose: %d %v", status, out)
	}
	p.Settled(10 * time.Second)
	var n int
	if err := p.Pool.QueryRow(context.Background(), `SELECT count(*) FROM notifications`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	stream, err := p.Broker.JetStream().Stream(context.Background(), p.Broker.NotifyStream())
	if err != nil {
		t.Fatal(err)
	}
	if msgs := stream.CachedInfo().State.Msgs; n != 0 || msgs != 0 {
		t.Errorf("%d notifications in the ledger and %d messages on the stream, want none", n, msgs)
	}
}

// TestHangingReceiverDelaysNoOperationAndNoOtherReceiver: a receiver that
// never answers holds up only its own deliveries. Once it holds as many
// requests as its concurrency allows (each signalled by the receiver as
// it arrives), and while it still holds them, every further operation
// goes from enqueue to succeeded, the healthy receiver beside it hears
// every operation, and the hanging one is sent nothing more. How long
// operations take beside it, against without any receiver, is measured
// by the notify stage of `make bench` (docs/benchmarks.md, "The notify
// stage"), not bounded here.
func TestHangingReceiverDelaysNoOperationAndNoOtherReceiver(t *testing.T) {
	t.Parallel()
	const n = 40
	cfg := fastRetries
	cfg.Timeout, cfg.Concurrency = time.Minute, 2
	release := make(chan struct{})
	held := make(chan struct{}, 4*cfg.Concurrency)
	hanging := testreceiver.New(t, func(_ int, _ http.ResponseWriter, r *http.Request) {
		held <- struct{}{}
		select {
		case <-release:
		case <-r.Context().Done():
		}
	})
	// Released before the pipeline stops, which waits for deliveries in
	// flight.
	defer close(release)
	healthy := testreceiver.New(t, nil)
	secret := testreceiver.Secret(t)
	p := testpipeline.New(t, testpipeline.Options{
		Env: map[string]string{"NOTIFY_SECRET": secret},
		Notifications: receiverYAML("hanging", hanging.URL, "NOTIFY_SECRET", "Acme Corp.", "operation.settled") +
			receiverYAML("healthy", healthy.URL, "NOTIFY_SECRET", "Acme Corp.", "operation.settled"),
		Notify: cfg,
	})
	p.Start(1)
	succeed := func(key string) {
		op := p.Enqueue(key, fmt.Sprintf(`{"sku":%q}`, key))
		p.WaitStatus(op, ledger.StatusSucceeded, 20*time.Second)
	}
	for i := range cfg.Concurrency {
		succeed(fmt.Sprintf("po-first-%d", i))
	}
	timeout := time.After(20 * time.Second)
	for i := range cfg.Concurrency {
		select {
		case <-held:
		case <-timeout:
			t.Fatalf("the hanging receiver holds %d requests, want its concurrency %d before the next operations", i, cfg.Concurrency)
		}
	}
	// Every request the hanging receiver was sent is held from here on.
	for i := range n {
		succeed(fmt.Sprintf("po-%d", i))
	}
	p.Eventually(20*time.Second, "the healthy receiver to hear every operation", func() bool { return len(healthy.Distinct()) == n+cfg.Concurrency })
	if got := len(hanging.Deliveries()); got > cfg.Concurrency {
		t.Errorf("the hanging receiver has %d requests, want at most its concurrency %d", got, cfg.Concurrency)
	}
}

// sendUnmatchedWebhook posts a signed supplier webhook for a reference no
// operation has: evidence that matches nothing, a review item of its own.
func sendUnmatchedWebhook(t *testing.T, p *testpipeline.Pipeline) {
	t.Helper()
	body := []byte(`{"event_id":"evt-stray","type":"order.created","reference":"al_nobody","provider_reference":"ord_77","status":"succeeded"}`)
	req, err := http.NewRequest("POST", p.API.URL+"/v1/webhooks/acme", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set(webhook.Header, webhook.Sign([]byte(testpipeline.WebhookSecret), p.Clock.Now(), body))
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode/100 != 2 {
		t.Fatalf("webhook: %d", res.StatusCode)
	}
}

// TestRedirectingReceiverIsNotFollowedAndIsGivenUp: a receiver that
// answers with a redirect is not followed (the address it points at hears
// nothing); its event is retried until the retry window ends and then
// given up, which the ledger lists for the console and every process's
// /metrics counts as actledger_notifications_failed_total{receiver}.
func TestRedirectingReceiverIsNotFollowedAndIsGivenUp(t *testing.T) {
	t.Parallel()
	secret := testreceiver.Secret(t)
	target := testreceiver.New(t, nil)
	redirecting := testreceiver.New(t, func(_ int, w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, target.URL+"/elsewhere", http.StatusTemporaryRedirect)
	})
	healthy := testreceiver.New(t, nil)
	cfg := fastRetries
	cfg.RetryFor = 1500 * time.Millisecond
	p := testpipeline.New(t, testpipeline.Options{
		Metrics: true,
		Env:     map[string]string{"NOTIFY_SECRET": secret},
		Notifications: receiverYAML("redirecting", redirecting.URL, "NOTIFY_SECRET", "Acme Corp.", "approval.requested") +
			receiverYAML("healthy", healthy.URL, "NOTIFY_SECRET", "Acme Corp.", "approval.requested"),
		Notify: cfg,
	})
	p.Start(1)
	if status, out := p.Propose("po-39", `{"sku":"A-1"}`); status != http.StatusAccepted {
		t.Fatalf("propose: %d %v", status, out)
	}
	var failures []ledger.ReceiverFailures
	p.Eventually(15*time.Second, "the redirecting receiver's event to be given up", func() bool {
		var err error
		failures, err = p.Store.NotificationFailures(context.Background(), ledger.WholeTenant(p.TenantID))
		if err != nil {
			t.Fatal(err)
		}
		return slices.ContainsFunc(failures, func(f ledger.ReceiverFailures) bool { return f.Receiver == "redirecting" && f.Failed == 1 })
	})
	notificationsSettled(t, p)
	if len(target.Deliveries()) != 0 {
		t.Errorf("the redirect's target got %d requests, want none", len(target.Deliveries()))
	}
	if n := len(redirecting.Deliveries()); n < 2 {
		t.Errorf("the redirecting receiver got %d attempts, want retries before the give-up", n)
	}
	if n := len(healthy.Distinct()); n != 1 {
		t.Errorf("the healthy receiver got %d events, want 1", n)
	}
	for _, f := range failures {
		if f.Receiver == "healthy" && f.Failed != 0 {
			t.Errorf("healthy receiver counted %d failures", f.Failed)
		}
	}
	status, out := p.Do("GET", "/metrics", p.MetricsToken(), "")
	raw := fmt.Sprint(out["raw"])
	for _, want := range []string{`actledger_notifications_failed_total{receiver="redirecting"} 1`, `actledger_notifications_failed_total{receiver="healthy"} 0`} {
		if status != http.StatusOK || !strings.Contains(raw, want) {
			t.Errorf("/metrics (%d) lacks %q", status, want)
		}
	}
}

// TestReceiverRemovedFromTheFileIsForgotten: a receiver taken out of the
// providers file is removed from the ledger when the notification worker
// starts again (its tenant's changes write no more events for it) and its
// durable consumer is deleted; the receivers that stay keep theirs.
func TestReceiverRemovedFromTheFileIsForgotten(t *testing.T) {
	t.Parallel()
	secret := testreceiver.Secret(t)
	a, b := testreceiver.New(t, nil), testreceiver.New(t, nil)
	p := testpipeline.New(t, testpipeline.Options{
		Env: map[string]string{"NOTIFY_SECRET": secret},
		Notifications: receiverYAML("stays", a.URL, "NOTIFY_SECRET", "Acme Corp.", "approval.requested") +
			receiverYAML("goes", b.URL, "NOTIFY_SECRET", "Acme Corp.", "approval.requested"),
		Notify: fastRetries,
	})
	p.Start(0)
	p.StopAll()
	p.Opts.Notifications = receiverYAML("stays", a.URL, "NOTIFY_SECRET", "Acme Corp.", "approval.requested")
	p.Retarget("acme", testpipeline.DefaultTarget) // the process wired again, for the edited file
	p.Start(0)

	ctx := context.Background()
	var names []string
	rows, err := p.Pool.Query(ctx, `SELECT name FROM notification_receivers ORDER BY name`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var n string
		if err := rows.Scan(&n); err != nil {
			t.Fatal(err)
		}
		names = append(names, n)
	}
	if rows.Err() != nil || !slices.Equal(names, []string{"stays"}) {
		t.Errorf("receivers in the ledger %v (%v), want [stays]", names, rows.Err())
	}
	stream, err := p.Broker.JetStream().Stream(ctx, p.Broker.NotifyStream())
	if err != nil {
		t.Fatal(err)
	}
	var consumers []string
	list := stream.ConsumerNames(ctx)
	for name := range list.Name() {
		consumers = append(consumers, name)
	}
	if want := []string{notify.ConsumerName(p.Broker.Prefix(), "stays")}; !slices.Equal(consumers, want) {
		t.Errorf("consumers %v, want %v", consumers, want)
	}
	if status, out := p.Propose("po-1", `{"sku":"A-1"}`); status != http.StatusAccepted {
		t.Fatalf("propose: %d %v", status, out)
	}
	p.Eventually(10*time.Second, "the remaining receiver's event", func() bool { return len(a.Deliveries()) == 1 })
	notificationsSettled(t, p)
	if len(b.Deliveries()) != 0 {
		t.Errorf("the removed receiver got %d requests", len(b.Deliveries()))
	}
}
