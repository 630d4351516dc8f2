package reconciler_test

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/actledger/actledger/auth"
	"github.com/actledger/actledger/internal/mocksupplier"
	"github.com/actledger/actledger/internal/testpipeline"
	"github.com/actledger/actledger/ledger"
	"github.com/actledger/actledger/provider"
	"github.com/actledger/actledger/reconciler"
)

var quiet = slog.New(slog.DiscardHandler)

// handled waits until the reconciler's consumer has acknowledged (applied
// or terminated) every evidence message up to stream sequence seq.
func handled(t *testing.T, p *testpipeline.Pipeline, seq uint64) {
	t.Helper()
	p.Eventually(settle, fmt.Sprintf("the reconciler to handle evidence message %d", seq), func() bool {
		cons, err := p.Broker.JetStream().Consumer(context.Background(), p.Broker.EvidenceStream(), reconciler.ConsumerName(p.Broker.Prefix()))
		if err != nil {
			return false
		}
		info, err := cons.Info(context.Background())
		return err == nil && info.AckFloor.Stream >= seq && info.NumAckPending == 0
	})
}

// TestForgedStaleResultMessageChangesNothing is the reproduction of issue
// 8: a message on the evidence subject carrying a "success" of its own
// (no stored row) used to move a paused, never-sent operation to
// succeeded. Now the message is terminated and the ledger is unchanged.
func TestForgedStaleResultMessageChangesNothing(t *testing.T) {
	t.Parallel()
	p := testpipeline.New(t, testpipeline.Options{LookupLag: -1, Mode: mocksupplier.Ignore})
	if status, out := p.Do("POST", "/v1/dispatch/pause", p.Operator, `{}`); status != 200 {
		t.Fatalf("pause: %d %v", status, out)
	}
	op := p.Enqueue("po-forged", `{"sku":"A-1"}`)
	p.Start(1)
	before := p.Kinds(op)

	forged := fmt.Sprintf(`{"kind":"stale_result","provider":"acme","reference":%q,"provider_reference":"x"}`, op.ExternalKey)
	// The forged message of the issue, then one naming a row id that does
	// not exist.
	for _, msg := range []string{forged, `{"kind":"stale_result","stale_result_id":424242}`} {
		ack, err := p.Broker.JetStream().Publish(context.Background(), p.Broker.EvidenceSubject("acme"), []byte(msg))
		if err != nil {
			t.Fatal(err)
		}
		handled(t, p, ack.Sequence)
		if got := p.Get(op); got.Status != ledger.StatusQueued {
			t.Fatalf("after %s: %s, want queued", msg, got.Status)
		}
	}

	got := p.Get(op)
	if got.Status != ledger.StatusQueued || got.ProviderReference != nil {
		t.Errorf("after the forged message: %s, provider reference %v; want queued and none", got.Status, got.ProviderReference)
	}
	if after := p.Kinds(op); !slices.Equal(after, before) {
		t.Errorf("events %v after the forged message, want %v", after, before)
	}
	if p.Orders(op) != 0 {
		t.Errorf("orders %d, want 0", p.Orders(op))
	}
}

// TestEvidenceMessageOnAnotherProvidersSubjectIsNotApplied: a message
// naming a real webhook event of acme, published on beta's subject, is
// terminated; the row is applied from its own message only.
func TestEvidenceMessageOnAnotherProvidersSubjectIsNotApplied(t *testing.T) {
	t.Parallel()
	p := testpipeline.New(t, testpipeline.Options{LookupLag: -1, Mode: mocksupplier.Ignore})
	p.Supplier.SetFaults("", mocksupplier.Fault{Kind: mocksupplier.DropAfterCommit})
	op := p.Enqueue("po-1", `{"sku":"A-1"}`)
	p.Start(1)
	p.WaitStatus(op, ledger.StatusReview, settle)
	// A real event of acme, stored without its own message.
	var id int64
	if err := p.Pool.QueryRow(context.Background(), `INSERT INTO webhook_events (provider, event_id, type, reference, provider_reference, status, payload)
VALUES ('acme', 'evt_x', 'order.created', $1, 'ord_x', 'succeeded', '{}') RETURNING id`, op.ExternalKey).Scan(&id); err != nil {
		t.Fatal(err)
	}
	ack, err := p.Broker.JetStream().Publish(context.Background(), p.Broker.EvidenceSubject("beta"), fmt.Appendf(nil, `{"kind":"webhook","webhook_event_id":%d}`, id))
	if err != nil {
		t.Fatal(err)
	}
	handled(t, p, ack.Sequence)
	if got := p.Get(op); got.Status != ledger.StatusReview {
		t.Errorf("after acme's event on beta's subject: %s, want review", got.Status)
	}
	if n := appliedWebhooks(t, p); n != 0 {
		t.Errorf("%d webhook events applied, want 0", n)
	}
}

// TestLostEvidenceMessageIsStillApplied: the relay published the
// webhook's evidence message and JetStream then lost it (here: deleted).
// The event is applied from Postgres once it has waited UnappliedAfter,
// and the operation settles with the one order the supplier has.
func TestLostEvidenceMessageIsStillApplied(t *testing.T) {
	t.Parallel()
	p := testpipeline.New(t, testpipeline.Options{LookupLag: -1, Mode: mocksupplier.Ignore})
	p.Supplier.SetFaults("", mocksupplier.Fault{Kind: mocksupplier.DropAfterCommit})
	op := p.Enqueue("po-1", `{"sku":"A-1","qty":3}`)
	p.Start(1)
	p.WaitStatus(op, ledger.StatusReview, settle) // nothing but evidence can settle it
	p.Reconciler.Stop()

	const ref = "ord_lost"
	body := fmt.Sprintf(`{"event_id":"evt_lost","type":"order.created","reference":%q,"provider_reference":%q,"status":"succeeded"}`, op.ExternalKey, ref)
	if got := signedWebhook(t, p, testpipeline.WebhookSecret, time.Now(), body); got != 202 {
		t.Fatalf("webhook: %d", got)
	}
	announced(t, p)
	stream, err := p.Broker.JetStream().Stream(context.Background(), p.Broker.EvidenceStream())
	if err != nil {
		t.Fatal(err)
	}
	msg, err := stream.GetLastMsgForSubject(context.Background(), p.Broker.EvidenceSubject("acme"))
	if err != nil {
		t.Fatal(err)
	}
	if err := stream.DeleteMsg(context.Background(), msg.Sequence); err != nil {
		t.Fatal(err)
	}

	// A reconciler with the default bound (30s) and a fast sweep; the test
	// clock passes the bound.
	r, err := reconciler.New(p.Store, p.Broker, reconciler.Config{Registry: p.Registry, SweepInterval: 50 * time.Millisecond, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(r.Stop)
	p.Clock.Advance(31 * time.Second)

	done := p.WaitStatus(op, ledger.StatusSucceeded, settle)
	if done.ProviderReference == nil || *done.ProviderReference != ref {
		t.Errorf("provider reference %v, want %s", done.ProviderReference, ref)
	}
	p.Eventually(settle, "the webhook event to be marked applied", func() bool { return appliedWebhooks(t, p) == 1 })
	var outcome string
	var sweeps int
	if err := p.Pool.QueryRow(context.Background(), `SELECT outcome, sweeps FROM webhook_events WHERE event_id = 'evt_lost'`).Scan(&outcome, &sweeps); err != nil {
		t.Fatal(err)
	}
	if outcome != string(ledger.OutcomeSettledSucceeded) || sweeps != 1 {
		t.Errorf("webhook event: outcome %q after %d sweeps, want %s after 1", outcome, sweeps, ledger.OutcomeSettledSucceeded)
	}
	if p.Orders(op) != 1 || p.Creates(op) != 1 {
		t.Errorf("orders %d, create requests %d; want 1 and 1", p.Orders(op), p.Creates(op))
	}
}

// TestReplayOfOneTenantEmitsNoneOfACollidingTenantsItems: "Acme Corp."
// and "Acme_Corp_" shared a review subject (subject_token of both is
// Acme_Corp_), and a replay by one emitted the other's operation id, key
// and reason as already_closed. Subjects now name the tenant's id.
func TestReplayOfOneTenantEmitsNoneOfACollidingTenantsItems(t *testing.T) {
	t.Parallel()
	p := testpipeline.New(t, testpipeline.Options{LookupLag: -1, Mode: mocksupplier.Ignore})
	p.Supplier.SetFaults("", mocksupplier.Fault{Kind: mocksupplier.DropAfterCommit}, mocksupplier.Fault{Kind: mocksupplier.DropAfterCommit})
	p.Start(1)
	mine := p.Enqueue("mine", `{"sku":"A-1"}`)
	p.WaitStatus(mine, ledger.StatusReview, settle)

	const other = "Acme_Corp_" // collides with "Acme Corp." under the old token
	approver, agent, operator := p.TokenFor(other, auth.RoleApprover), p.TokenFor(other, auth.RoleAgent), p.TokenFor(other, auth.RoleOperator)
	status, approval := p.Do("POST", "/v1/approvals", approver, `{"action":"supplier.create_order","params":{"sku":"Z-9"},"ttl_seconds":600,"policy_version":"p1"}`)
	if status != http.StatusCreated {
		t.Fatalf("approval of %s: %d %v", other, status, approval)
	}
	status, theirs := p.Do("POST", "/v1/operations", agent, fmt.Sprintf(`{"action":"supplier.create_order","key":"theirs","params":{"sku":"Z-9"},"approval_id":%q}`, approval["id"]))
	if status != http.StatusCreated {
		t.Fatalf("operation of %s: %d %v", other, status, theirs)
	}
	theirsID := uuid.MustParse(theirs["id"].(string))
	p.Eventually(settle, "the other tenant's operation in review", func() bool {
		_, out := p.Do("GET", "/v1/operations/"+theirsID.String(), agent, "")
		return out["status"] == string(ledger.StatusReview)
	})
	announced(t, p)

	for _, tt := range []struct {
		tenant, token, want, notWant string
	}{
		{p.Tenant, p.Operator, "mine", "theirs"},
		{other, operator, "theirs", "mine"},
	} {
		got := replayAs(t, p, tt.token, `{"dry_run":true}`)
		if _, ok := got.results[tt.want]; !ok {
			t.Errorf("replay by %q lacks its own item %q: %+v", tt.tenant, tt.want, got)
		}
		if res, ok := got.results[tt.notWant]; ok || got.summary.Items != 1 {
			t.Errorf("replay by %q emitted the other tenant's item %q (%s): %+v", tt.tenant, tt.notWant, res, got)
		}
	}
}

// TestUnmatchedEvidenceIsNeverShownAcrossTenants: unmatched evidence of a
// provider with a tenant is that tenant's only; of a provider without one
// (allowed only without webhooks), nobody's: it used to be listed for, and
// closable by, every tenant's operators.
func TestUnmatchedEvidenceIsNeverShownAcrossTenants(t *testing.T) {
	t.Parallel()
	p := testpipeline.New(t, testpipeline.Options{LookupLag: -1, Mode: mocksupplier.Ignore})
	outsider := p.TokenFor("globex", auth.RoleOperator)
	reg, err := provider.Parse([]byte(`providers:
  acme:
    base_url: http://127.0.0.1:1
    create: {method: POST, path: /v1/orders}
    tenant: "Acme Corp."
    review: {owner: supply-ops, deadline: 4h}
  untenanted:
    base_url: http://127.0.0.1:1
    create: {method: POST, path: /v1/orders}
    review: {owner: nobody, deadline: 4h}
actions:
  supplier.create_order: {provider: acme}
  other.create: {provider: untenanted}
`))
	if err != nil {
		t.Fatal(err)
	}
	r, err := reconciler.New(p.Store, p.Broker, reconciler.Config{Registry: reg, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"acme", "untenanted"} {
		out, err := r.Apply(context.Background(), reconciler.Evidence{Source: "webhook:evt_" + name, Provider: name,
			Reference: "nobody-asked-" + name, ProviderReference: "ord_" + name, Status: ledger.EvidenceSucceeded, Final: true})
		if err != nil || out != ledger.OutcomeUnmatched {
			t.Fatalf("evidence of %s: %s, %v; want unmatched", name, out, err)
		}
	}
	keys := func(token string) []string {
		t.Helper()
		status, out := p.Do("GET", "/v1/review", token, "")
		if status != 200 {
			t.Fatalf("GET /v1/review: %d %v", status, out)
		}
		var ks []string
		items, _ := out["items"].([]any)
		for _, it := range items {
			ks = append(ks, fmt.Sprint(it.(map[string]any)["key"]))
		}
		return ks
	}
	if got := keys(p.Operator); !slices.Equal(got, []string{"nobody-asked-acme"}) {
		t.Errorf("the owning tenant sees %v, want only its provider's item", got)
	}
	if got := keys(outsider); len(got) != 0 {
		t.Errorf("another tenant sees %v, want nothing", got)
	}
	var untenanted, owned int64
	if err := p.Pool.QueryRow(context.Background(), `SELECT
		(SELECT id FROM unmatched_evidence WHERE provider = 'untenanted'),
		(SELECT id FROM unmatched_evidence WHERE provider = 'acme')`).Scan(&untenanted, &owned); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		who, token string
		id         int64
	}{{"the owner", p.Operator, untenanted}, {"another tenant", outsider, untenanted}, {"another tenant", outsider, owned}} {
		status, out := p.Do("POST", fmt.Sprintf("/v1/review/evidence/%d/resolve", tt.id), tt.token, `{"note":"not ours"}`)
		if status != 404 {
			t.Errorf("%s closing evidence %d: %d %v, want 404", tt.who, tt.id, status, out)
		}
	}
	if status, out := p.Do("POST", fmt.Sprintf("/v1/review/evidence/%d/resolve", owned), p.Operator, `{"note":"ours"}`); status != 200 {
		t.Errorf("the owner closing its evidence: %d %v", status, out)
	}
	if strings.Join(keys(p.Operator), ",") != "" {
		t.Errorf("still open for the owner: %v", keys(p.Operator))
	}
}

// TestStaleResultIsStoredAndAppliedEvenIfItsMessageIsLost: a fenced
// worker's late success is a stale_results row (provider and key from the
// operation, whatever the worker passes); its message only names the row,
// and the row is applied from Postgres when the message is lost.
func TestStaleResultIsStoredAndAppliedEvenIfItsMessageIsLost(t *testing.T) {
	t.Parallel()
	p := testpipeline.New(t, testpipeline.Options{LookupLag: -1, Mode: mocksupplier.Ignore})
	p.Supplier.SetFaults("", mocksupplier.Fault{Kind: mocksupplier.DropAfterCommit})
	op := p.Enqueue("po-1", `{"sku":"A-1"}`)
	p.Start(1)
	p.WaitStatus(op, ledger.StatusReview, settle)
	p.Reconciler.Stop()

	// The worker says another provider and key: neither is believed.
	seen := &ledger.EvidenceMessage{Kind: ledger.EvidenceStaleResult, Provider: "beta", Reference: "al_someone_else",
		ProviderReference: "ord_stale", Worker: "worker:w9"}
	if err := p.Store.KeepStaleResult(context.Background(), op.ID, "worker:w9", map[string]any{"would_be": "succeeded"}, seen); err != nil {
		t.Fatal(err)
	}
	announced(t, p)
	stream, err := p.Broker.JetStream().Stream(context.Background(), p.Broker.EvidenceStream())
	if err != nil {
		t.Fatal(err)
	}
	msg, err := stream.GetLastMsgForSubject(context.Background(), p.Broker.EvidenceSubject("acme"))
	if err != nil {
		t.Fatal(err)
	}
	var id int64
	if err := p.Pool.QueryRow(context.Background(), `SELECT id FROM stale_results WHERE operation_id = $1 AND provider = 'acme'`, op.ID).Scan(&id); err != nil {
		t.Fatalf("stale result row of the operation's provider: %v", err)
	}
	if got, want := string(msg.Data), fmt.Sprintf(`{"kind":"stale_result","stale_result_id":%d}`, id); got != want {
		t.Errorf("message %s, want %s (a pointer only)", got, want)
	}
	if err := stream.DeleteMsg(context.Background(), msg.Sequence); err != nil {
		t.Fatal(err)
	}

	r, err := reconciler.New(p.Store, p.Broker, reconciler.Config{Registry: p.Registry, SweepInterval: 50 * time.Millisecond, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(r.Stop)
	p.Clock.Advance(31 * time.Second)
	done := p.WaitStatus(op, ledger.StatusSucceeded, settle)
	if done.ProviderReference == nil || *done.ProviderReference != "ord_stale" {
		t.Errorf("provider reference %v, want ord_stale", done.ProviderReference)
	}
	if p.Orders(op) != 1 {
		t.Errorf("orders %d, want 1", p.Orders(op))
	}
}
