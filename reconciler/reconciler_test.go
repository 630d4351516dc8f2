package reconciler_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/actledger/actledger/auth"
	"github.com/actledger/actledger/internal/mocksupplier"
	"github.com/actledger/actledger/internal/testpipeline"
	"github.com/actledger/actledger/ledger"
	"github.com/actledger/actledger/provider"
	"github.com/actledger/actledger/reconciler"
	"github.com/actledger/actledger/webhook"
)

const settle = 20 * time.Second

func TestLateWebhookSettlesAnUnknownOperationWithOneOrder(t *testing.T) {
	t.Parallel()
	p := testpipeline.New(t, testpipeline.Options{LookupLag: -1, Mode: mocksupplier.Ignore, Webhooks: true, WebhookDelay: time.Second})
	p.Supplier.SetFaults("", mocksupplier.Fault{Kind: mocksupplier.DropAfterCommit})
	op := p.Enqueue("po-1", `{"sku":"A-1","qty":3}`)
	p.Start(1)
	p.WaitStatus(op, ledger.StatusReview, settle) // nothing else can settle it...
	done := p.WaitStatus(op, ledger.StatusSucceeded, settle)
	if p.Orders(op) != 1 || p.Creates(op) != 1 {
		t.Errorf("orders %d, create requests %d; want 1 and 1", p.Orders(op), p.Creates(op))
	}
	if done.ProviderReference == nil || !strings.HasPrefix(*done.ProviderReference, "ord_") {
		t.Errorf("provider reference %v", done.ProviderReference)
	}
	if kinds := strings.Join(p.Kinds(op), ","); !strings.HasSuffix(kinds, "needs_review,evidence") {
		t.Errorf("events %s", kinds)
	}
}

func TestSuccessAfterTheApprovalExpiredIsRecordedFlaggedAndNotSentAgain(t *testing.T) {
	t.Parallel()
	p := testpipeline.New(t, testpipeline.Options{LookupLag: -1, Mode: mocksupplier.Ignore, Webhooks: true, WebhookDelay: 1500 * time.Millisecond})
	p.Supplier.SetFaults("", mocksupplier.Fault{Kind: mocksupplier.DropAfterCommit})
	op := p.Enqueue("po-1", `{"sku":"A-1"}`)
	p.Start(1)
	p.WaitStatus(op, ledger.StatusReview, settle)
	p.Clock.Advance(2 * time.Hour) // the approval expires while the outcome is unknown
	done := p.WaitStatus(op, ledger.StatusSucceeded, settle)
	if len(done.Flags) != 1 || done.Flags[0] != ledger.FlagLateSuccess {
		t.Errorf("flags = %v, want [%s]", done.Flags, ledger.FlagLateSuccess)
	}
	p.Settled(settle)
	if p.Orders(op) != 1 || p.Creates(op) != 1 {
		t.Errorf("orders %d, create requests %d; want 1 and 1", p.Orders(op), p.Creates(op))
	}
}

func TestSecondSupplierOrderForOneOperationIsADuplicateEffect(t *testing.T) {
	t.Parallel()
	p := testpipeline.New(t, testpipeline.Options{Idempotency: true, LookupLag: 0, Mode: mocksupplier.Honour, Webhooks: true})
	op := p.Enqueue("po-1", `{"sku":"A-1"}`)
	p.Start(1)
	first := p.WaitStatus(op, ledger.StatusSucceeded, settle)
	// The first order's webhook either settled the operation itself (it can
	// arrive before the dispatcher records the response) or changed nothing;
	// either way it must be applied before the second order appears.
	p.Eventually(settle, "the first webhook to be applied", func() bool { return appliedWebhooks(t, p) == 1 })

	pc, _ := p.Registry.Provider("acme")
	res, err := http.Post(pc.BaseURL+"/admin/orders", "application/json",
		strings.NewReader(fmt.Sprintf(`{"client_reference":%q,"params":{"sku":"A-1"}}`, op.ExternalKey)))
	if err != nil || res.StatusCode != 201 {
		t.Fatalf("second supplier order: %v %v", res, err)
	}
	res.Body.Close()
	done := p.WaitStatus(op, ledger.StatusReview, settle)
	if *done.ReviewReason != ledger.ReasonDuplicateEffect || p.Orders(op) != 2 {
		t.Errorf("reason %s orders %d; want %s and 2", *done.ReviewReason, p.Orders(op), ledger.ReasonDuplicateEffect)
	}
	if *done.ProviderReference != *first.ProviderReference {
		t.Errorf("the recorded reference changed from %s to %s", *first.ProviderReference, *done.ProviderReference)
	}
	// The first order's success arriving again (a late webhook, a fenced
	// worker's answer) does not close the duplicate.
	again, err := p.Reconciler.Apply(context.Background(), reconciler.Evidence{Source: "late", Provider: "acme",
		Reference: op.ExternalKey, ProviderReference: *first.ProviderReference, Status: ledger.EvidenceSucceeded, Final: true})
	if err != nil || again != ledger.OutcomeRecorded || p.Get(op).Status != ledger.StatusReview {
		t.Errorf("late success of the first order: %s, %v, now %s; want it recorded for the person and still review", again, err, p.Get(op).Status)
	}
	// An operation whose effect was confirmed is never sent again, even
	// from review, and even when a later lookup finds nothing.
	if err := p.Store.AppendEvent(context.Background(), op.ID, "replay_lookup_absent", "reconciler:replay", map[string]any{"lookup": "absent"}); err != nil {
		t.Fatal(err)
	}
	items, err := reviewItems(context.Background(), p.Reconciler, p.TenantID)
	if err != nil || len(items) != 1 || items[0].RetryAllowed {
		t.Errorf("review items %+v (err %v): want one, retry not allowed", items, err)
	}
	if _, err := p.Reconciler.Retry(context.Background(), ledger.WholeTenant(p.TenantID), "operator:test", op.ID, "try again"); !errors.Is(err, reconciler.ErrRetryNotAllowed) {
		t.Errorf("retry of a confirmed effect: err = %v, want ErrRetryNotAllowed", err)
	}
}

// appliedWebhooks counts the webhook events the reconciler has applied,
// whatever came of them.
func appliedWebhooks(t *testing.T, p *testpipeline.Pipeline) int {
	t.Helper()
	var n int
	if err := p.Pool.QueryRow(context.Background(), `SELECT count(*) FROM webhook_events WHERE applied_at IS NOT NULL`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// signedWebhook posts a webhook body signed with secret at ts.
func signedWebhook(t *testing.T, p *testpipeline.Pipeline, secret string, ts time.Time, body string) int {
	t.Helper()
	req, _ := http.NewRequest("POST", p.API.URL+"/v1/webhooks/acme", strings.NewReader(body))
	req.Header.Set(webhook.Header, webhook.Sign([]byte(secret), ts, []byte(body)))
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	return res.StatusCode
}

func TestForgedStaleAndReplayedWebhooksLeaveTheLedgerUnchanged(t *testing.T) {
	t.Parallel()
	p := testpipeline.New(t, testpipeline.Options{LookupLag: -1, Mode: mocksupplier.Ignore})
	p.Supplier.SetFaults("", mocksupplier.Fault{Kind: mocksupplier.DropAfterCommit})
	op := p.Enqueue("po-1", `{"sku":"A-1"}`)
	p.Start(1)
	p.WaitStatus(op, ledger.StatusReview, settle)
	before := len(p.Kinds(op))

	body := fmt.Sprintf(`{"event_id":"evt_1","type":"order.created","reference":%q,"provider_reference":"ord_x","status":"succeeded"}`, op.ExternalKey)
	if got := signedWebhook(t, p, "not-the-secret", time.Now(), body); got != 401 {
		t.Errorf("forged signature: %d, want 401", got)
	}
	if got := signedWebhook(t, p, testpipeline.WebhookSecret, time.Now().Add(-10*time.Minute), body); got != 401 {
		t.Errorf("stale timestamp: %d, want 401", got)
	}
	p.Settled(settle)
	if got := p.Get(op); got.Status != ledger.StatusReview || len(p.Kinds(op)) != before {
		t.Fatalf("after rejected webhooks: %s with %d events, want review with %d", got.Status, len(p.Kinds(op)), before)
	}
	if got := signedWebhook(t, p, testpipeline.WebhookSecret, time.Now(), body); got != 202 {
		t.Fatalf("genuine webhook: %d, want 202", got)
	}
	p.WaitStatus(op, ledger.StatusSucceeded, settle)
	settled := len(p.Kinds(op))
	if got := signedWebhook(t, p, testpipeline.WebhookSecret, time.Now(), body); got != 200 {
		t.Errorf("replayed event: %d, want 200", got)
	}
	p.Settled(settle)
	if got := len(p.Kinds(op)); got != settled {
		t.Errorf("replayed event changed the history: %d events, want %d", got, settled)
	}
}

func TestEvidenceThatMatchesNoOperationBecomesAReviewItem(t *testing.T) {
	t.Parallel()
	p := testpipeline.New(t, testpipeline.Options{Idempotency: true, LookupLag: 0, Mode: mocksupplier.Honour, Webhooks: true})
	p.Start(1)
	pc, _ := p.Registry.Provider("acme")
	res, err := http.Post(pc.BaseURL+"/admin/orders", "application/json", strings.NewReader(`{"client_reference":"nobody-asked","params":{"sku":"Z"}}`))
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	var item map[string]any
	p.Eventually(settle, "an unmatched_evidence review item", func() bool {
		_, out := p.Do("GET", "/v1/review", p.Operator, "")
		items, _ := out["items"].([]any)
		for _, it := range items {
			if m := it.(map[string]any); m["reason"] == string(ledger.ReasonUnmatchedEvidence) {
				item = m
				return true
			}
		}
		return false
	})
	// Every item of the review list is in the contract's review state; an
	// unmatched one has no operation, and says so with its evidence id.
	if item["key"] != "nobody-asked" || item["owner"] != "supply-ops" || item["status"] != "review" || item["operation_id"] != nil {
		t.Errorf("item = %v", item)
	}
	path := fmt.Sprintf("/v1/review/evidence/%.0f/resolve", item["evidence_id"].(float64))
	if status, out := p.Do("POST", path, p.Operator, `{"note":"test order placed by hand"}`); status != 200 {
		t.Fatalf("resolve: %d %v", status, out)
	}
	_, out := p.Do("GET", "/v1/review", p.Operator, "")
	if items, _ := out["items"].([]any); len(items) != 0 {
		t.Errorf("still open: %v", items)
	}
}

func TestEvidenceWithOtherQuantitiesThanApprovedGoesToReview(t *testing.T) {
	t.Parallel()
	// A long lookup lag keeps the operation unknown while the webhook comes.
	p := testpipeline.New(t, testpipeline.Options{LookupLag: time.Minute, Mode: mocksupplier.Ignore})
	p.Supplier.SetFaults("", mocksupplier.Fault{Kind: mocksupplier.DropAfterCommit})
	op := p.Enqueue("po-1", `{"sku":"A-1","qty":3}`)
	p.Start(1)
	p.WaitStatus(op, ledger.StatusUnknown, settle)
	body := fmt.Sprintf(`{"event_id":"evt_m","type":"order.created","reference":%q,"provider_reference":"ord_m","status":"succeeded","data":{"params":{"sku":"A-1","qty":30}}}`, op.ExternalKey)
	if got := signedWebhook(t, p, testpipeline.WebhookSecret, time.Now(), body); got != 202 {
		t.Fatalf("webhook: %d", got)
	}
	p.Eventually(settle, "the mismatch review", func() bool {
		got := p.Get(op)
		return got.Status == ledger.StatusReview && *got.ReviewReason == ledger.ReasonEvidenceMismatch
	})
	// Evidence that agrees with the approval (a late answer without the
	// amounts) is kept for the person but does not override the mismatch.
	for _, status := range []ledger.EvidenceStatus{ledger.EvidenceSucceeded, ledger.EvidenceFailed} {
		out, err := p.Reconciler.Apply(context.Background(), reconciler.Evidence{Source: "late", Provider: "acme",
			Reference: op.ExternalKey, ProviderReference: "ord_m", Status: status, Final: true})
		if got := p.Get(op); err != nil || out != ledger.OutcomeRecorded || got.Status != ledger.StatusReview || *got.ReviewReason != ledger.ReasonEvidenceMismatch {
			t.Errorf("%s evidence after the mismatch: %s, %v; now %s; want recorded and still in review", status, out, err, got.Status)
		}
	}
}

// flakyLookups makes a real provider's lookups fail while down is set, as
// a supplier's read API having an outage would.
type flakyLookups struct {
	provider.Provider
	down *atomic.Bool
}

func (f flakyLookups) Lookup(ctx context.Context, key provider.LookupRequest) provider.LookupResult {
	if f.down.Load() {
		return provider.LookupResult{Status: provider.LookupError, HTTPStatus: 503, Error: "lookup API down", At: time.Now()}
	}
	return f.Provider.Lookup(ctx, key)
}

func TestReplayAfterTheProviderRecoversSettlesWhatItCanAndASecondReplayChangesNothing(t *testing.T) {
	t.Parallel()
	var down atomic.Bool
	down.Store(true)
	p := testpipeline.New(t, testpipeline.Options{
		Idempotency: false, LookupLag: 0, Mode: mocksupplier.Ignore, MaxAttempts: 2, MaxElapsed: 3 * time.Second,
		Providers: func(real provider.Provider) provider.Provider { return flakyLookups{real, &down} },
	})
	p.Start(1)
	// lost: the order exists, but lookups fail until the review deadline.
	p.Supplier.SetFaults("", mocksupplier.Fault{Kind: mocksupplier.DropAfterCommit})
	lost := p.Enqueue("po-lost", `{"sku":"A-1"}`)
	if got := *p.WaitStatus(lost, ledger.StatusReview, settle).ReviewReason; got != ledger.ReasonLookupFailing {
		t.Fatalf("lost: reason %s", got)
	}
	// refused: the supplier refused every attempt; no order exists.
	p.Supplier.SetFaults("", mocksupplier.Fault{Kind: mocksupplier.RateLimit429}, mocksupplier.Fault{Kind: mocksupplier.RateLimit429})
	refused := p.Enqueue("po-refused", `{"sku":"B-2"}`)
	if got := *p.WaitStatus(refused, ledger.StatusReview, settle).ReviewReason; got != ledger.ReasonRetriesExhausted {
		t.Fatalf("refused: reason %s", got)
	}

	// Replay reads the review stream: wait until the relay has published
	// both announcements (an operation is in review a moment before).
	announced(t, p)
	during := replay(t, p, `{}`)
	if during.summary.Changed != 0 || during.results["po-lost"] != reconciler.ReplayLookupFailed {
		t.Errorf("replay during the outage: %+v", during)
	}
	down.Store(false) // the provider recovers
	dry := replay(t, p, `{"dry_run":true}`)
	if dry.summary.Changed != 0 || dry.results["po-lost"] != reconciler.ReplayWouldSettleSucceeded {
		t.Errorf("dry run: %+v", dry)
	}
	if got := p.Get(lost); got.Status != ledger.StatusReview {
		t.Fatalf("a dry run changed the ledger: %s", got.Status)
	}
	first := replay(t, p, `{}`)
	if first.results["po-lost"] != reconciler.ReplayApplied(ledger.OutcomeSettledSucceeded) || first.results["po-refused"] != reconciler.ReplayAbsenceConfirmed || first.summary.Changed != 2 {
		t.Errorf("first replay: %+v", first)
	}
	p.WaitStatus(lost, ledger.StatusSucceeded, time.Second)
	second := replay(t, p, `{}`)
	if second.summary.Changed != 0 || second.results["po-lost"] != "already_closed" {
		t.Errorf("second replay changed something: %+v", second)
	}

	// What is left is for a person; absence is confirmed, so a retry is safe.
	_, out := p.Do("GET", "/v1/review", p.Operator, "")
	items, _ := out["items"].([]any)
	if len(items) != 1 || items[0].(map[string]any)["retry_allowed"] != true {
		t.Fatalf("review items: %v", items)
	}
	if status, out := p.Do("POST", "/v1/operations/"+refused.ID.String()+"/retry", p.Operator, `{"note":"supplier limits lifted"}`); status != 200 {
		t.Fatalf("retry: %d %v", status, out)
	}
	p.WaitStatus(refused, ledger.StatusSucceeded, settle)
	if p.Orders(lost) != 1 || p.Orders(refused) != 1 {
		t.Errorf("orders: lost %d, refused %d; want 1 and 1", p.Orders(lost), p.Orders(refused))
	}
}

// announced waits until the relay has published every outbox row, review
// announcements included.
func announced(t *testing.T, p *testpipeline.Pipeline) {
	t.Helper()
	p.Eventually(settle, "the outbox to be published", func() bool {
		var n int
		if err := p.Pool.QueryRow(context.Background(), `SELECT count(*) FROM outbox WHERE published_at IS NULL`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n == 0
	})
}

type replayResult struct {
	results map[string]reconciler.ReplayResult
	summary reconciler.ReplaySummary
}

func replay(t *testing.T, p *testpipeline.Pipeline, body string) replayResult {
	t.Helper()
	return replayAs(t, p, p.Operator, body)
}

// replayAs is replay by the operator whose token is token.
func replayAs(t *testing.T, p *testpipeline.Pipeline, token, body string) replayResult {
	t.Helper()
	req, _ := http.NewRequest("POST", p.API.URL+"/v1/review/replay", strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+token)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	out := replayResult{results: map[string]reconciler.ReplayResult{}}
	sc := bufio.NewScanner(res.Body)
	for sc.Scan() {
		var line struct {
			Item    *reconciler.ReplayItem    `json:"item"`
			Summary *reconciler.ReplaySummary `json:"summary"`
			Error   map[string]string         `json:"error"`
		}
		if err := json.Unmarshal(sc.Bytes(), &line); err != nil {
			t.Fatalf("replay line %q: %v", sc.Text(), err)
		}
		switch {
		case line.Item != nil:
			out.results[line.Item.Key] = line.Item.Result
		case line.Summary != nil:
			out.summary = *line.Summary
		case line.Error != nil:
			t.Fatalf("replay error: %v", line.Error)
		}
	}
	return out
}

func TestAnotherTenantsReviewItemAnswers404(t *testing.T) {
	t.Parallel()
	p := testpipeline.New(t, testpipeline.Options{LookupLag: -1, Mode: mocksupplier.Ignore})
	p.Supplier.SetFaults("", mocksupplier.Fault{Kind: mocksupplier.DropAfterCommit})
	op := p.Enqueue("po-1", `{"sku":"A-1"}`)
	p.Start(1)
	p.WaitStatus(op, ledger.StatusReview, settle)
	intruder := p.TokenFor("globex", auth.RoleOperator)
	for path, body := range map[string]string{"/resolve": `{"outcome":"cancelled","note":"x"}`, "/retry": `{"note":"x"}`} {
		status, out := p.Do("POST", "/v1/operations/"+op.ID.String()+path, intruder, body)
		if status != 404 {
			t.Errorf("%s by another tenant: %d %v", path, status, out)
		}
	}
	_, out := p.Do("GET", "/v1/review", intruder, "")
	if items, _ := out["items"].([]any); len(items) != 0 {
		t.Errorf("another tenant sees %v", items)
	}
	// The owner resolves it, with a note that becomes an event.
	status, res := p.Do("POST", "/v1/operations/"+op.ID.String()+"/resolve", p.Operator, `{"outcome":"succeeded","provider_reference":"ord_checked_by_phone","note":"confirmed with the supplier"}`)
	if status != 200 {
		t.Fatalf("resolve: %d %v", status, res)
	}
	if got := p.Get(op); got.Status != ledger.StatusSucceeded || *got.ProviderReference != "ord_checked_by_phone" {
		t.Errorf("after resolve: %s %v", got.Status, got.ProviderReference)
	}
}

func TestResolvingADuplicateWithACompensationCreatesALinkedOperation(t *testing.T) {
	t.Parallel()
	p := testpipeline.New(t, testpipeline.Options{Idempotency: true, LookupLag: 0, Mode: mocksupplier.Honour, Webhooks: true})
	op := p.Enqueue("po-1", `{"sku":"A-1"}`)
	p.Start(1)
	p.WaitStatus(op, ledger.StatusSucceeded, settle)
	pc, _ := p.Registry.Provider("acme")
	res, err := http.Post(pc.BaseURL+"/admin/orders", "application/json",
		strings.NewReader(fmt.Sprintf(`{"client_reference":%q,"params":{"sku":"A-1"}}`, op.ExternalKey)))
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	dup := p.WaitStatus(op, ledger.StatusReview, settle)

	// The fix is a new, separately approved operation, never a reuse of
	// the original's identity.
	fix := p.Approve(`{"sku":"A-1","note":"return the duplicate"}`, time.Hour)
	body := fmt.Sprintf(`{"outcome":"succeeded","provider_reference":%q,"note":"keep the first order",
		"compensation":{"action":%q,"key":"po-1-return","params":{"sku":"A-1","note":"return the duplicate"},"approval_id":%q}}`,
		*dup.ProviderReference, testpipeline.Action, fix.ID)
	status, out := p.Do("POST", "/v1/operations/"+op.ID.String()+"/resolve", p.Operator, body)
	if status != 200 {
		t.Fatalf("resolve: %d %v", status, out)
	}
	comp := out["compensation"].(map[string]any)
	if comp["key"] != "po-1-return" || comp["external_key"] == op.ExternalKey {
		t.Errorf("compensation %v reuses the original's identity", comp)
	}
	compOp, err := p.Store.GetByExternalKey(context.Background(), comp["external_key"].(string))
	if err != nil {
		t.Fatal(err)
	}
	p.WaitStatus(compOp, ledger.StatusSucceeded, settle)
	if p.Orders(compOp) != 1 || p.Orders(op) != 2 {
		t.Errorf("orders: compensation %d, original %d; want 1 and 2", p.Orders(compOp), p.Orders(op))
	}
	if kinds := strings.Join(p.Kinds(compOp), ","); !strings.Contains(kinds, "compensation_for") {
		t.Errorf("compensation history %s does not link the original", kinds)
	}
}

// reviewItems lists every open review item of the tenant, page after page,
// as an operator paging through ReviewPage would.
func reviewItems(ctx context.Context, r *reconciler.Reconciler, tenant uuid.UUID) ([]reconciler.ReviewItem, error) {
	var all []reconciler.ReviewItem
	var after *reconciler.ReviewCursor
	for {
		items, next, err := r.ReviewPage(ctx, ledger.WholeTenant(tenant), after, 500)
		if err != nil {
			return nil, err
		}
		all = append(all, items...)
		if next == nil {
			return all, nil
		}
		after = next
	}
}
