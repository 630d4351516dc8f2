package api_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/actledger/actledger/internal/mocksupplier"
	"github.com/actledger/actledger/internal/testpipeline"
	"github.com/actledger/actledger/ledger"
)

// purchaseOrderKey is the business key of the tests' action: one
// operation per purchase order, whatever key the agent sends. The schema
// does not require purchase_order, so the key alone judges params that
// lack it.
const purchaseOrderKey = `key: '"po-" + string(params.purchase_order)', ` +
	`params_schema: {type: object, required: [sku, qty], properties: {purchase_order: {type: integer}, sku: {type: string}, qty: {type: integer, minimum: 1}}, additionalProperties: false}`

// po is params of purchase order n.
func po(n, qty int) string { return fmt.Sprintf(`{"purchase_order":%d,"sku":"A-1","qty":%d}`, n, qty) }

// requestBody is POST /v1/operations under an approval (approvalID) or as
// a proposal (approvalID ""), with the caller's key clientKey ("" sends
// none).
func requestBody(clientKey, params string, approvalID uuid.UUID) string {
	key := ""
	if clientKey != "" {
		key = fmt.Sprintf(`"key":%q,`, clientKey)
	}
	if approvalID == uuid.Nil {
		return fmt.Sprintf(`{"action":%q,%s"params":%s,"request_approval":true}`, testpipeline.Action, key, params)
	}
	return fmt.Sprintf(`{"action":%q,%s"params":%s,"approval_id":%q}`, testpipeline.Action, key, params, approvalID)
}

// conflictNames checks a 409 key_reused_with_different_params names op:
// its id, status and summary in error.operation, its id in the message.
func conflictNames(t *testing.T, status int, out map[string]any, op ledger.Operation) {
	t.Helper()
	e, _ := out["error"].(map[string]any)
	named, _ := e["operation"].(map[string]any)
	if status != http.StatusConflict || e["code"] != "key_reused_with_different_params" {
		t.Fatalf("answer %d %v, want 409 key_reused_with_different_params", status, out)
	}
	if named["id"] != op.ID.String() || named["status"] != string(op.Status) || named["summary"] != op.Summary() ||
		!strings.Contains(fmt.Sprint(e["message"]), op.ID.String()) {
		t.Errorf("conflict names %v (message %q); want operation %s, %s, %q", named, e["message"], op.ID, op.Status, op.Summary())
	}
}

// A re-planning agent that sends purchase order 37 again under a new key
// gets the same operation, and the supplier one order: under a second
// approval, as a proposal, with no key at all.
func TestReplannedPurchaseOrderUnderNewClientKeysIsOneOperationAndOneOrder(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		// again is the re-planned request after the first one.
		again func(p *testpipeline.Pipeline, first uuid.UUID) string
	}{
		{"under the same approval", func(_ *testpipeline.Pipeline, first uuid.UUID) string { return requestBody("call-2", po(37, 3), first) }},
		{"under a second approval", func(p *testpipeline.Pipeline, _ uuid.UUID) string {
			return requestBody("call-2", po(37, 3), p.Approve(po(37, 3), time.Hour).ID)
		}},
		{"as a proposal", func(_ *testpipeline.Pipeline, _ uuid.UUID) string { return requestBody("call-2", po(37, 3), uuid.Nil) }},
		{"as a proposal without a key", func(_ *testpipeline.Pipeline, _ uuid.UUID) string { return requestBody("", po(37, 3), uuid.Nil) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			p := testpipeline.New(t, testpipeline.Options{ActionContract: purchaseOrderKey})
			p.Start(1)
			approval := p.Approve(po(37, 3), time.Hour)
			status, _, out := doWithHeader(t, p, "POST", "/v1/operations", p.Agent, requestBody("call-1", po(37, 3), approval.ID))
			if status != http.StatusCreated || out["key"] != "po-37" || out["client_key"] != "call-1" {
				t.Fatalf("first request = %d %v, want 201 keyed po-37 with client key call-1", status, out)
			}
			op := p.Operation(out)

			status, h, again := doWithHeader(t, p, "POST", "/v1/operations", p.Agent, tc.again(p, approval.ID))
			if status != http.StatusOK || h.Get("Idempotent-Replayed") != "true" || again["id"] != op.ID.String() || again["client_key"] != "call-1" {
				t.Fatalf("re-planned request = %d %v (replayed %q), want 200 replaying %s with its first client key",
					status, again, h.Get("Idempotent-Replayed"), op.ID)
			}
			p.WaitStatus(op, ledger.StatusSucceeded, 10*time.Second)
			p.Settled(10 * time.Second)
			if orders, creates := p.Supplier.TotalOrders(), p.Creates(op); orders != 1 || creates != 1 {
				t.Errorf("supplier has %d orders from %d create requests, want 1 from 1", orders, creates)
			}
		})
	}
}

// The control: two purchase orders whose params differ in nothing else
// are two operations and two orders, even under one client key (it
// decides nothing).
func TestTwoPurchaseOrdersWithOtherwiseIdenticalParamsAreTwoOrders(t *testing.T) {
	t.Parallel()
	p := testpipeline.New(t, testpipeline.Options{ActionContract: purchaseOrderKey})
	p.Start(1)
	var ops []ledger.Operation
	for _, n := range []int{37, 38} {
		status, out := p.Do("POST", "/v1/operations", p.Agent, requestBody("call-1", po(n, 3), p.Approve(po(n, 3), time.Hour).ID))
		if status != http.StatusCreated || out["key"] != fmt.Sprintf("po-%d", n) {
			t.Fatalf("purchase order %d = %d %v, want 201 keyed po-%d", n, status, out, n)
		}
		ops = append(ops, p.Operation(out))
	}
	for _, op := range ops {
		p.WaitStatus(op, ledger.StatusSucceeded, 10*time.Second)
		if got := p.Orders(op); got != 1 {
			t.Errorf("%s: %d orders, want 1", op.Key, got)
		}
	}
	if got := p.Supplier.TotalOrders(); got != 2 {
		t.Errorf("supplier has %d orders, want 2", got)
	}
}

// Other params under a purchase order that exists are a 409 that names
// the operation, whichever way they come and whatever key they carry; the
// supplier gets nothing more.
func TestChangedParamsUnderOneBusinessKeyAreRefusedNamingTheOperation(t *testing.T) {
	t.Parallel()
	p := testpipeline.New(t, testpipeline.Options{ActionContract: purchaseOrderKey})
	p.Start(1)
	status, out := p.Do("POST", "/v1/operations", p.Agent, requestBody("call-1", po(37, 3), p.Approve(po(37, 3), time.Hour).ID))
	if status != http.StatusCreated {
		t.Fatalf("first request = %d %v", status, out)
	}
	op := p.WaitStatus(p.Operation(out), ledger.StatusSucceeded, 10*time.Second)

	for _, tc := range []struct{ name, body string }{
		{"approved, under a new key", requestBody("call-2", po(37, 4), p.Approve(po(37, 4), time.Hour).ID)},
		{"approved, under the first key", requestBody("call-1", po(37, 4), p.Approve(po(37, 4), time.Hour).ID)},
		{"proposed, under a new key", requestBody("call-3", po(37, 5), uuid.Nil)},
		{"proposed, without a key", requestBody("", po(37, 5), uuid.Nil)},
	} {
		status, out := p.Do("POST", "/v1/operations", p.Agent, tc.body)
		t.Run(tc.name, func(t *testing.T) { conflictNames(t, status, out, p.Get(op)) })
	}
	p.Settled(10 * time.Second)
	if orders, creates := p.Supplier.TotalOrders(), p.Creates(op); orders != 1 || creates != 1 {
		t.Errorf("supplier has %d orders from %d create requests, want 1 from 1", orders, creates)
	}
	// The first conflict is an event, and every refusal counts on it.
	var events int
	for _, k := range p.Kinds(op) {
		if k == string(ledger.EventKeyConflict) {
			events++
		}
	}
	if history := p.History(op); events != 1 || !strings.Contains(history, `"conflicts": 4`) {
		t.Errorf("%d key_conflict events, want 1 counting the 4 refusals:\n%s", events, history)
	}
}

// An order whose outcome is unknown (its answer was lost, nothing has
// confirmed it yet) cannot be routed around: proposing it again under a
// new key answers that operation, still unknown, and other params are
// refused naming it; nothing more reaches the supplier.
func TestUnknownPurchaseOrderProposedAgainUnderANewKeyIsNotSentAgain(t *testing.T) {
	t.Parallel()
	// The lookup that would settle it comes only after an hour.
	p := testpipeline.New(t, testpipeline.Options{ActionContract: purchaseOrderKey, LookupLag: time.Hour, Mode: mocksupplier.Ignore})
	p.Supplier.SetFaults("", mocksupplier.Fault{Kind: mocksupplier.DropAfterCommit})
	p.Start(1)
	status, out := p.Do("POST", "/v1/operations", p.Agent, requestBody("call-1", po(37, 3), p.Approve(po(37, 3), time.Hour).ID))
	if status != http.StatusCreated {
		t.Fatalf("first request = %d %v", status, out)
	}
	op := p.WaitStatus(p.Operation(out), ledger.StatusUnknown, 10*time.Second)

	status, h, again := doWithHeader(t, p, "POST", "/v1/operations", p.Agent, requestBody("call-2", po(37, 3), uuid.Nil))
	if status != http.StatusOK || h.Get("Idempotent-Replayed") != "true" || again["id"] != op.ID.String() || again["status"] != "unknown" {
		t.Fatalf("proposed again = %d %v, want 200 replaying %s, unknown", status, again, op.ID)
	}
	if summary := fmt.Sprint(again["summary"]); !strings.Contains(summary, "may already have happened") {
		t.Errorf("summary %q, want it to say the order may already exist", summary)
	}
	status, changed := p.Do("POST", "/v1/operations", p.Agent, requestBody("call-3", po(37, 4), uuid.Nil))
	conflictNames(t, status, changed, op)

	p.Settled(10 * time.Second)
	if got := p.Get(op); got.Status != ledger.StatusUnknown {
		t.Errorf("operation is %s, want still unknown", got.Status)
	}
	if orders, creates := p.Supplier.TotalOrders(), p.Creates(op); orders != 1 || creates != 1 {
		t.Errorf("supplier has %d orders from %d create requests, want 1 from 1", orders, creates)
	}
}

// With an auto_approve policy, proposals of one purchase order under
// several keys at once are one operation, approved once, and one order.
func TestAutoApprovedProposalsOfOnePurchaseOrderUnderSeveralKeysMakeOneOrder(t *testing.T) {
	t.Parallel()
	p := testpipeline.New(t, testpipeline.Options{
		ActionContract: purchaseOrderKey + `, approval: {auto_approve: "params.qty <= 10", policy_version: p1}`,
	})
	p.Start(1)
	const n = 5
	statuses, ids := make([]int, n), make([]any, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			var out map[string]any
			statuses[i], out = p.Do("POST", "/v1/operations", p.Agent, requestBody(fmt.Sprintf("call-%d", i), po(37, 3), uuid.Nil))
			ids[i] = out["id"]
		})
	}
	wg.Wait()
	created, replayed := 0, 0
	for i := range n {
		switch {
		case ids[i] != ids[0]:
			t.Errorf("proposal %d answered operation %v, want %v", i, ids[i], ids[0])
		case statuses[i] == http.StatusCreated:
			created++
		case statuses[i] == http.StatusOK:
			replayed++
		default:
			t.Errorf("proposal %d answered %d", i, statuses[i])
		}
	}
	if created != 1 || replayed != n-1 {
		t.Errorf("%d created (201) and %d replayed (200), want 1 and %d", created, replayed, n-1)
	}
	op := p.Operation(map[string]any{"id": ids[0]})
	p.WaitStatus(op, ledger.StatusSucceeded, 10*time.Second)
	if a := approvalsOf(t, p, op.ID); len(a) != 1 || !strings.HasPrefix(a[0], "policy:p1") {
		t.Errorf("approvals %v, want one by policy:p1", a)
	}
	p.Settled(10 * time.Second)
	if orders, creates := p.Supplier.TotalOrders(), p.Creates(op); orders != 1 || creates != 1 {
		t.Errorf("supplier has %d orders from %d create requests, want 1 from 1", orders, creates)
	}
}

// Params that give no business key are refused before anything is
// stored, naming the param the key is made from; an action without a
// business key still needs the caller's key for a proposal.
func TestParamsThatGiveNoBusinessKeyAreRefusedNamingTheParam(t *testing.T) {
	t.Parallel()
	p := testpipeline.New(t, testpipeline.Options{ActionContract: purchaseOrderKey})
	approval := p.Approve(`{"sku":"A-1","qty":3}`, time.Hour)
	for _, tc := range []struct {
		name, body string
		status     int
		code, says string
	}{
		{"approved, without the param", requestBody("call-1", `{"sku":"A-1","qty":3}`, approval.ID), 422, "invalid_params", "params/purchase_order: is missing"},
		{"proposed, without the param", requestBody("call-1", `{"sku":"A-1","qty":3}`, uuid.Nil), 422, "invalid_params", "params/purchase_order: is missing"},
		{"proposed without key or param", requestBody("", `{"sku":"A-1","qty":3}`, uuid.Nil), 422, "invalid_params", "params/purchase_order"},
		{"the param breaks the schema too", requestBody("call-1", `{"purchase_order":{"n":37},"sku":"A-1","qty":3}`, uuid.Nil), 422, "invalid_params", "params/purchase_order"},
		{"an action without a business key", fmt.Sprintf(`{"action":%q,"params":{},"request_approval":true}`, testpipeline.OtherAction), 400, "invalid_field", "key: is required"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			status, out := p.Do("POST", "/v1/operations", p.Agent, tc.body)
			e, _ := out["error"].(map[string]any)
			if status != tc.status || e["code"] != tc.code || !strings.Contains(fmt.Sprint(e["message"]), tc.says) {
				t.Errorf("got %d %v, want %d %s saying %q", status, out, tc.status, tc.code, tc.says)
			}
		})
	}
	var n int
	if err := p.Pool.QueryRow(context.Background(), `SELECT count(*) FROM operations`).Scan(&n); err != nil || n != 0 {
		t.Errorf("%d operations stored (%v), want none", n, err)
	}
}

// GET /v1/actions names each action's business key, so an agent (and the
// MCP tools) know the key is derived; an action without one says null.
func TestActionsListNamesTheBusinessKey(t *testing.T) {
	t.Parallel()
	p := testpipeline.New(t, testpipeline.Options{ActionContract: purchaseOrderKey})
	status, out := p.Do("GET", "/v1/actions", p.Agent, "")
	raw, _ := json.Marshal(out["actions"])
	var actions []struct {
		Name        string  `json:"name"`
		BusinessKey *string `json:"business_key"`
	}
	if err := json.Unmarshal(raw, &actions); status != http.StatusOK || err != nil {
		t.Fatalf("GET /v1/actions = %d %v", status, out)
	}
	got := map[string]string{}
	for _, a := range actions {
		got[a.Name] = fmt.Sprint(a.BusinessKey != nil)
		if a.BusinessKey != nil {
			got[a.Name] = *a.BusinessKey
		}
	}
	if want := `"po-" + string(params.purchase_order)`; got[testpipeline.Action] != want || got[testpipeline.OtherAction] != "false" {
		t.Errorf("business keys %v, want %s: %s and %s: none", got, testpipeline.Action, want, testpipeline.OtherAction)
	}
}
