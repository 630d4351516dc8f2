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

	"github.com/actledger/actledger/auth"
	"github.com/actledger/actledger/internal/testdb"
	"github.com/actledger/actledger/internal/testpipeline"
	"github.com/actledger/actledger/ledger"
)

// orderSchema is the contract's example schema.
const orderSchema = `params_schema: {type: object, required: [sku, qty], properties: {sku: {type: string}, qty: {type: integer, minimum: 1}}, additionalProperties: false}`

// dispatchRows counts op's dispatch messages in the outbox: a proposal
// must have none until it is approved.
func dispatchRows(t *testing.T, p *testpipeline.Pipeline, id uuid.UUID) int {
	t.Helper()
	var n int
	if err := p.Pool.QueryRow(context.Background(),
		`SELECT count(*) FROM outbox WHERE msg_id LIKE 'dispatch.' || $1::text || '.%'`, id).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// approvalsOf lists the approvals granted to proposal id: approver,
// approver token (empty for a policy), uses.
func approvalsOf(t *testing.T, p *testpipeline.Pipeline, id uuid.UUID) []string {
	t.Helper()
	rows, err := p.Pool.Query(context.Background(),
		`SELECT approver || ' token=' || coalesce(approver_token_id::text, '') || ' uses=' || uses || '/' || max_uses || ' policy=' || policy_version
		 FROM approvals WHERE operation_id = $1 ORDER BY created_at`, id)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var s string
		if err := rows.Scan(&s); err != nil {
			t.Fatal(err)
		}
		out = append(out, s)
	}
	return out
}

func approve(p *testpipeline.Pipeline, token string, id uuid.UUID, fingerprint string) (int, map[string]any) {
	return p.Do("POST", "/v1/operations/"+id.String()+"/approve", token, fmt.Sprintf(`{"params_fingerprint":%q,"note":"ok"}`, fingerprint))
}

func errCode(out map[string]any) string {
	e, _ := out["error"].(map[string]any)
	code, _ := e["code"].(string)
	return code
}

func TestProposalApprovedByAPersonCreatesExactlyOneOrder(t *testing.T) {
	t.Parallel()
	p := testpipeline.New(t, testpipeline.Options{ActionContract: `description: Order goods, approval: {policy_version: "2026-11"}`})
	p.Start(1)

	status, out := p.Propose("po-1", `{"sku":"A-1","qty":3}`)
	if status != http.StatusAccepted || out["status"] != "awaiting_approval" || out["approval_id"] != nil {
		t.Fatalf("propose = %d %v, want 202 awaiting_approval without approval", status, out)
	}
	if !strings.Contains(out["summary"].(string), "waits for a person to approve") {
		t.Errorf("summary = %q", out["summary"])
	}
	op := p.Operation(out)
	if n := dispatchRows(t, p, op.ID); n != 0 {
		t.Fatalf("a proposal has %d dispatch messages, want none before approval", n)
	}

	status, list := p.Do("GET", "/v1/approval-requests", p.Approver, "")
	items, _ := list["items"].([]any)
	if status != http.StatusOK || len(items) != 1 {
		t.Fatalf("approval requests = %d %v, want the one proposal", status, list)
	}
	item := items[0].(map[string]any)
	if item["operation_id"] != op.ID.String() || item["reason"] != "restock" || item["params_fingerprint"] != op.ParamsFingerprint ||
		item["account"] != "acct_test" || item["environment"] != "test" || item["description"] != "Order goods" || item["expires_at"] == nil {
		t.Errorf("approval request = %v", item)
	}
	if status, _ := p.Do("GET", "/v1/approval-requests", p.Agent, ""); status != http.StatusForbidden {
		t.Errorf("agent lists approval requests: %d, want 403", status)
	}
	if status, _ := approve(p, p.Agent, op.ID, op.ParamsFingerprint); status != http.StatusForbidden {
		t.Errorf("agent approves: %d, want 403", status)
	}
	foreign := p.TokenFor("Other Corp.", auth.RoleApprover)
	if status, out := approve(p, foreign, op.ID, op.ParamsFingerprint); status != http.StatusNotFound {
		t.Errorf("another tenant's approver approves: %d %v, want 404", status, out)
	}

	status, out = approve(p, p.Approver, op.ID, op.ParamsFingerprint)
	if status != http.StatusOK || out["status"] != "queued" || out["approval_id"] == nil {
		t.Fatalf("approve = %d %v, want 200 queued with its approval", status, out)
	}
	p.WaitStatus(op, ledger.StatusSucceeded, 10*time.Second)
	if got := p.Orders(op); got != 1 {
		t.Fatalf("supplier has %d orders, want exactly 1", got)
	}
	approvals := approvalsOf(t, p, op.ID)
	if len(approvals) != 1 || !strings.HasPrefix(approvals[0], "approver:") || !strings.Contains(approvals[0], "uses=1/1 policy=2026-11") ||
		strings.Contains(approvals[0], "token= ") {
		t.Errorf("approvals = %v, want one person's, used once, policy 2026-11", approvals)
	}
	if status, out := approve(p, p.Approver, op.ID, op.ParamsFingerprint); status != http.StatusConflict || errCode(out) != "not_awaiting_approval" {
		t.Errorf("second approve = %d %v, want 409 not_awaiting_approval", status, out)
	}
	if got := p.Orders(op); got != 1 {
		t.Fatalf("supplier has %d orders after a second approve, want 1", got)
	}
}

func TestProposalDeniedIsCancelledAndNeverSent(t *testing.T) {
	t.Parallel()
	p := testpipeline.New(t, testpipeline.Options{})
	p.Start(1)
	_, out := p.Propose("po-2", `{"sku":"A-1","qty":3}`)
	op := p.Operation(out)

	if status, out := p.Do("POST", "/v1/operations/"+op.ID.String()+"/deny", p.Approver, `{}`); status != http.StatusBadRequest {
		t.Errorf("deny without reason = %d %v, want 400", status, out)
	}
	status, out := p.Do("POST", "/v1/operations/"+op.ID.String()+"/deny", p.Approver, `{"reason":"we have stock"}`)
	if status != http.StatusOK || out["status"] != "cancelled" {
		t.Fatalf("deny = %d %v, want 200 cancelled", status, out)
	}
	if s := out["summary"].(string); !strings.Contains(s, "A person declined") || !strings.Contains(s, "we have stock") || !strings.Contains(s, "nothing was sent") {
		t.Errorf("summary = %q", s)
	}
	if status, out := approve(p, p.Approver, op.ID, op.ParamsFingerprint); status != http.StatusConflict || errCode(out) != "not_awaiting_approval" {
		t.Errorf("approve after deny = %d %v, want 409 not_awaiting_approval", status, out)
	}
	// A replay of the proposal answers the cancelled operation; nothing new.
	if status, out := p.Propose("po-2", `{"qty":3,"sku":"A-1"}`); status != http.StatusOK || out["status"] != "cancelled" {
		t.Errorf("replay after deny = %d %v, want 200 cancelled", status, out)
	}
	if n := dispatchRows(t, p, op.ID); n != 0 {
		t.Errorf("denied proposal has %d dispatch messages, want none", n)
	}
	if a := approvalsOf(t, p, op.ID); len(a) != 0 {
		t.Errorf("denied proposal has approvals %v", a)
	}
	if got := p.Creates(op); got != 0 {
		t.Errorf("supplier got %d create requests for a denied proposal", got)
	}
	kinds := p.Kinds(op)
	if kinds[len(kinds)-1] != "denied" {
		t.Errorf("events = %v, want denied last", kinds)
	}
}

func TestConcurrentProposalReplaysMakeOneOperation(t *testing.T) {
	t.Parallel()
	p := testpipeline.New(t, testpipeline.Options{})
	proposeAtOnce(t, p, 20, "po-3", `{"sku":"A-1","qty":3}`, http.StatusAccepted)
	var ops int
	if err := p.Pool.QueryRow(context.Background(), `SELECT count(*) FROM operations WHERE key = 'po-3'`).Scan(&ops); err != nil {
		t.Fatal(err)
	}
	if ops != 1 {
		t.Errorf("%d operations stored, want 1", ops)
	}
}

func TestProposalWithChangedParamsUnderItsKeyIsRefused(t *testing.T) {
	t.Parallel()
	p := testpipeline.New(t, testpipeline.Options{})
	_, out := p.Propose("po-4", `{"sku":"A-1","qty":3}`)
	op := p.Operation(out)
	status, out := p.Propose("po-4", `{"sku":"A-1","qty":30}`)
	if status != http.StatusConflict || errCode(out) != "key_reused_with_different_params" {
		t.Fatalf("changed params = %d %v, want 409 key_reused_with_different_params", status, out)
	}
	if got := p.Get(op); got.Status != ledger.StatusAwaitingApproval || got.Version != 1 {
		t.Errorf("proposal is %s v%d after a conflict, want awaiting_approval v1", got.Status, got.Version)
	}
	if kinds := p.Kinds(op); kinds[len(kinds)-1] != "key_conflict" {
		t.Errorf("events = %v, want a key_conflict recorded", kinds)
	}
	// Without a key a proposal has no identity: refused before anything.
	body := fmt.Sprintf(`{"action":%q,"params":{"sku":"A-1","qty":3},"request_approval":true}`, testpipeline.Action)
	if status, out := p.Do("POST", "/v1/operations", p.Agent, body); status != http.StatusBadRequest {
		t.Errorf("proposal without key = %d %v, want 400", status, out)
	}
}

func TestApproveWithStaleFingerprintChangesNothing(t *testing.T) {
	t.Parallel()
	p := testpipeline.New(t, testpipeline.Options{})
	_, out := p.Propose("po-5", `{"sku":"A-1","qty":3}`)
	op := p.Operation(out)
	_, stale, err := ledger.Canonicalize([]byte(`{"sku":"A-1","qty":30}`))
	if err != nil {
		t.Fatal(err)
	}
	status, out := approve(p, p.Approver, op.ID, stale)
	if status != http.StatusConflict || errCode(out) != "fingerprint_mismatch" {
		t.Fatalf("stale fingerprint = %d %v, want 409 fingerprint_mismatch", status, out)
	}
	if got := p.Get(op); got.Status != ledger.StatusAwaitingApproval || got.Version != 1 || got.ApprovalID != uuid.Nil {
		t.Errorf("proposal is %s v%d approval %s, want unchanged", got.Status, got.Version, got.ApprovalID)
	}
	if a := approvalsOf(t, p, op.ID); len(a) != 0 {
		t.Errorf("approvals %v stored by a refused approve", a)
	}
	if n := dispatchRows(t, p, op.ID); n != 0 {
		t.Errorf("%d dispatch messages after a refused approve", n)
	}
}

func TestTwoConcurrentApprovalsOfOneProposalOneWins(t *testing.T) {
	t.Parallel()
	p := testpipeline.New(t, testpipeline.Options{})
	p.Start(1)
	_, out := p.Propose("po-6", `{"sku":"A-1","qty":3}`)
	op := p.Operation(out)
	tokens := []string{p.Approver, p.TokenFor(p.Tenant, auth.RoleApprover)}
	statuses := make([]int, 2)
	codes := make([]string, 2)
	var wg sync.WaitGroup
	for i, tok := range tokens {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var out map[string]any
			statuses[i], out = approve(p, tok, op.ID, op.ParamsFingerprint)
			codes[i] = errCode(out)
		}()
	}
	wg.Wait()
	won, lost := 0, 0
	for i := range statuses {
		switch {
		case statuses[i] == http.StatusOK:
			won++
		case statuses[i] == http.StatusConflict && codes[i] == "not_awaiting_approval":
			lost++
		}
	}
	if won != 1 || lost != 1 {
		t.Fatalf("answers %v %v, want one 200 and one 409 not_awaiting_approval", statuses, codes)
	}
	if a := approvalsOf(t, p, op.ID); len(a) != 1 {
		t.Errorf("approvals = %v, want exactly one", a)
	}
	p.WaitStatus(op, ledger.StatusSucceeded, 10*time.Second)
	if got := p.Orders(op); got != 1 {
		t.Errorf("supplier has %d orders, want 1", got)
	}
}

func TestExpiredApprovalRequestIsHeldAndNeverSent(t *testing.T) {
	t.Parallel()
	p := testpipeline.New(t, testpipeline.Options{ActionContract: `approval: {request_ttl: 1h}`})
	p.Start(1)
	_, out := p.Propose("po-7", `{"sku":"A-1","qty":3}`)
	op := p.Operation(out)
	if op.RequestExpiresAt == nil || op.RequestExpiresAt.Sub(op.CreatedAt) != time.Hour {
		t.Fatalf("request expires at %v, created %v; want request_ttl 1h", op.RequestExpiresAt, op.CreatedAt)
	}
	p.Clock.Advance(2 * time.Hour)
	held := p.WaitStatus(op, ledger.StatusHeld, 10*time.Second)
	if s := held.Summary(); !strings.Contains(s, "expired") || !strings.Contains(s, "nothing was sent") {
		t.Errorf("summary = %q", s)
	}
	if status, out := approve(p, p.Approver, op.ID, op.ParamsFingerprint); status != http.StatusConflict || errCode(out) != "not_awaiting_approval" {
		t.Errorf("approve after expiry = %d %v, want 409 not_awaiting_approval", status, out)
	}
	if n := dispatchRows(t, p, op.ID); n != 0 || p.Creates(op) != 0 {
		t.Errorf("expired proposal: %d dispatch messages, %d creates; want none", n, p.Creates(op))
	}
	_, list := p.Do("GET", "/v1/approval-requests", p.Approver, "")
	if items, _ := list["items"].([]any); len(items) != 0 {
		t.Errorf("approval requests after expiry = %v, want none", items)
	}
}

func TestRevokingTheAgentTokenHoldsItsProposals(t *testing.T) {
	t.Parallel()
	p := testpipeline.New(t, testpipeline.Options{})
	p.Start(1)
	_, out := p.Propose("po-8", `{"sku":"A-1","qty":3}`)
	op := p.Operation(out)
	held, err := p.CLITokens().Revoke(context.Background(), op.RequestedBy.String(), "operator:test")
	if err != nil {
		t.Fatal(err)
	}
	if len(held) != 1 || held[0].ID != op.ID || held[0].Status != ledger.StatusHeld {
		t.Fatalf("revoke held %v, want the proposal", held)
	}
	if status, out := approve(p, p.Approver, op.ID, op.ParamsFingerprint); status != http.StatusConflict || errCode(out) != "not_awaiting_approval" {
		t.Errorf("approve after the agent's token was revoked = %d %v, want 409 not_awaiting_approval", status, out)
	}
	if n := dispatchRows(t, p, op.ID); n != 0 || p.Creates(op) != 0 {
		t.Errorf("held proposal: %d dispatch messages, %d creates; want none", n, p.Creates(op))
	}
}

// policy is an action contract whose proposals of up to 10 items are
// approved by policy 2026-11.
const policy = `approval: {auto_approve: "params.qty <= 10", policy_version: "2026-11"}`

func TestAutoApprovePolicyTrueQueuesAtOnce(t *testing.T) {
	t.Parallel()
	p := testpipeline.New(t, testpipeline.Options{ActionContract: policy})
	p.Start(1)
	status, out := p.Propose("po-9", `{"sku":"A-1","qty":5}`)
	if status != http.StatusCreated || out["status"] != "queued" || out["approval_id"] == nil {
		t.Fatalf("propose = %d %v, want 201 queued with an approval", status, out)
	}
	op := p.Operation(out)
	if a := approvalsOf(t, p, op.ID); len(a) != 1 || a[0] != "policy:2026-11 token= uses=1/1 policy=2026-11" {
		t.Errorf("approvals = %v, want one by policy:2026-11 without a token", a)
	}
	p.WaitStatus(op, ledger.StatusSucceeded, 10*time.Second)
	if got := p.Orders(op); got != 1 {
		t.Errorf("supplier has %d orders, want 1", got)
	}
	if kinds := p.Kinds(op); len(kinds) < 2 || kinds[0] != "created" || kinds[1] != "approved" {
		t.Errorf("events = %v, want created then approved", kinds)
	}
}

func TestAutoApprovePolicyFalseWaitsForAPerson(t *testing.T) {
	t.Parallel()
	p := testpipeline.New(t, testpipeline.Options{ActionContract: policy})
	status, out := p.Propose("po-10", `{"sku":"A-1","qty":50}`)
	if status != http.StatusAccepted || out["status"] != "awaiting_approval" {
		t.Fatalf("propose = %d %v, want 202 awaiting_approval", status, out)
	}
	if a := approvalsOf(t, p, p.Operation(out).ID); len(a) != 0 {
		t.Errorf("approvals = %v, want none", a)
	}
}

func TestAutoApprovePolicyErrorNeverApproves(t *testing.T) {
	t.Parallel()
	p := testpipeline.New(t, testpipeline.Options{ActionContract: policy})
	for key, params := range map[string]string{
		"no-qty":     `{"sku":"A-1"}`,               // no such key
		"string-qty": `{"sku":"A-1","qty":"three"}`, // no such overload
	} {
		status, out := p.Propose(key, params)
		if status != http.StatusAccepted || out["status"] != "awaiting_approval" {
			t.Errorf("%s: propose = %d %v, want 202 awaiting_approval", key, status, out)
			continue
		}
		if a := approvalsOf(t, p, p.Operation(out).ID); len(a) != 0 {
			t.Errorf("%s: approvals = %v, want none", key, a)
		}
	}
}

func TestParamsViolatingTheSchemaAreRefusedBeforeAnythingIsStored(t *testing.T) {
	t.Parallel()
	p := testpipeline.New(t, testpipeline.Options{ActionContract: orderSchema})
	bad := `{"sku":"A-1","qty":0}`
	status, out := p.Propose("po-11", bad)
	if status != http.StatusUnprocessableEntity || errCode(out) != "invalid_params" {
		t.Fatalf("proposal = %d %v, want 422 invalid_params", status, out)
	}
	if msg := out["error"].(map[string]any)["message"].(string); !strings.Contains(msg, "params/qty") {
		t.Errorf("message %q does not name params/qty", msg)
	}
	body := fmt.Sprintf(`{"action":%q,"params":{"sku":"A-1","qty":3,"colour":"red"},"ttl_seconds":60,"policy_version":"p1"}`, testpipeline.Action)
	if status, out := p.Do("POST", "/v1/approvals", p.Approver, body); status != http.StatusUnprocessableEntity || errCode(out) != "invalid_params" {
		t.Errorf("approval = %d %v, want 422 invalid_params", status, out)
	}
	// An approval made past the API (so one exists) still does not let
	// params that break the schema through.
	a := p.Approve(bad, time.Hour)
	body = fmt.Sprintf(`{"action":%q,"key":"po-12","params":%s,"approval_id":%q}`, testpipeline.Action, bad, a.ID)
	if status, out := p.Do("POST", "/v1/operations", p.Agent, body); status != http.StatusUnprocessableEntity || errCode(out) != "invalid_params" {
		t.Errorf("operation = %d %v, want 422 invalid_params", status, out)
	}
	var ops, approvals, uses int
	if err := p.Pool.QueryRow(context.Background(),
		`SELECT (SELECT count(*) FROM operations), (SELECT count(*) FROM approvals), (SELECT coalesce(sum(uses), 0) FROM approvals)`).Scan(&ops, &approvals, &uses); err != nil {
		t.Fatal(err)
	}
	if ops != 0 || approvals != 1 || uses != 0 {
		t.Errorf("stored %d operations, %d approvals (%d uses); want nothing but the test's own unused approval", ops, approvals, uses)
	}
	// Params that fit are accepted.
	if status, out := p.Propose("po-13", `{"sku":"A-1","qty":1}`); status != http.StatusAccepted {
		t.Errorf("valid proposal = %d %v, want 202", status, out)
	}
}

func TestApprovalRequestsArePagedOldestFirst(t *testing.T) {
	t.Parallel()
	p := testpipeline.New(t, testpipeline.Options{})
	var want []string
	for i := range 5 {
		_, out := p.Propose(fmt.Sprint("po-page-", i), fmt.Sprintf(`{"sku":"A-1","qty":%d}`, i+1))
		want = append(want, p.Operation(out).ID.String())
		p.Clock.Advance(time.Millisecond)
	}
	var got []string
	path := "/v1/approval-requests?limit=2"
	for pages := 0; path != ""; pages++ {
		if pages > 5 {
			t.Fatal("pages do not end")
		}
		status, out := p.Do("GET", path, p.Approver, "")
		if status != http.StatusOK {
			t.Fatalf("%s = %d %v", path, status, out)
		}
		items, _ := out["items"].([]any)
		if len(items) > 2 {
			t.Fatalf("page of %d items, limit 2", len(items))
		}
		for _, it := range items {
			got = append(got, it.(map[string]any)["operation_id"].(string))
		}
		path = ""
		if next, ok := out["next_cursor"].(string); ok {
			path = "/v1/approval-requests?limit=2&cursor=" + next
		}
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("pages list %v, want oldest first %v", got, want)
	}
	if status, _ := p.Do("GET", "/v1/approval-requests?limit=501", p.Approver, ""); status != http.StatusBadRequest {
		t.Errorf("limit 501 = %d, want 400", status)
	}
	if status, out := p.Do("GET", "/v1/approval-requests", p.TokenFor("Other Corp.", auth.RoleApprover), ""); status != http.StatusOK || len(out["items"].([]any)) != 0 {
		t.Errorf("another tenant's approver sees %d %v, want no items", status, out)
	}
}

// TestExistingKeyAnswersBeforeATightenedParamsSchema proves the contract's
// order of checks: an existing key answers (replay 200, conflict 409)
// before the params schema is judged, so an agent replaying a request
// made under an earlier, looser schema gets the operation it already has,
// not a 422.
func TestExistingKeyAnswersBeforeATightenedParamsSchema(t *testing.T) {
	t.Parallel()
	p := testpipeline.New(t, testpipeline.Options{ActionContract: orderSchema})
	ctx := context.Background()
	agent, err := p.Tokens.Authenticate(ctx, p.Agent)
	if err != nil {
		t.Fatal(err)
	}
	// qty 0 passed the schema the operations were stored under; the
	// schema now configured refuses it.
	const loose, changed = `{"sku":"A-1","qty":0}`, `{"sku":"A-1","qty":-1}`
	a := p.Approve(loose, time.Hour)
	queued, _, err := p.Store.Enqueue(ctx, ledger.EnqueueRequest{
		TenantID: p.TenantID, TokenID: agent.TokenID, Action: testpipeline.Action, Key: "po-31",
		Provider: "acme", Params: []byte(loose), ApprovalID: a.ID,
	})
	if err != nil {
		t.Fatal(err)
	}
	proposed, _, err := p.Store.Propose(ctx, ledger.ProposeRequest{
		TenantID: p.TenantID, TokenID: agent.TokenID, Action: testpipeline.Action, Key: "po-32",
		Provider: "acme", Params: []byte(loose), RequestTTL: time.Hour,
	})
	if err != nil {
		t.Fatal(err)
	}
	// Without a key the approval's id is the key.
	b := p.Approve(loose, time.Hour)
	keyless, _, err := p.Store.Enqueue(ctx, ledger.EnqueueRequest{
		TenantID: p.TenantID, TokenID: agent.TokenID, Action: testpipeline.Action,
		Provider: "acme", Params: []byte(loose), ApprovalID: b.ID,
	})
	if err != nil {
		t.Fatal(err)
	}
	keyed := fmt.Sprintf(`{"action":%q,"params":%s,"approval_id":%q}`, testpipeline.Action, loose, b.ID)
	withApproval := func(key, params string) string {
		return fmt.Sprintf(`{"action":%q,"key":%q,"params":%s,"approval_id":%q}`, testpipeline.Action, key, params, a.ID)
	}
	proposal := func(key, params string) string {
		return fmt.Sprintf(`{"action":%q,"key":%q,"params":%s,"request_approval":true}`, testpipeline.Action, key, params)
	}
	tests := []struct {
		name       string
		body       string
		wantStatus int
		wantCode   string
		wantID     uuid.UUID
	}{
		{"replay with an approval", withApproval("po-31", loose), http.StatusOK, "", queued.ID},
		{"changed params with an approval", withApproval("po-31", changed), http.StatusConflict, "key_reused_with_different_params", uuid.Nil},
		{"new key with an approval", withApproval("po-33", loose), http.StatusUnprocessableEntity, "invalid_params", uuid.Nil},
		{"replay keyed by its approval", keyed, http.StatusOK, "", keyless.ID},
		{"replay of a proposal", proposal("po-32", loose), http.StatusOK, "", proposed.ID},
		{"changed params of a proposal", proposal("po-32", changed), http.StatusConflict, "key_reused_with_different_params", uuid.Nil},
		{"new proposal", proposal("po-34", loose), http.StatusUnprocessableEntity, "invalid_params", uuid.Nil},
	}
	for _, tt := range tests {
		status, out := p.Do("POST", "/v1/operations", p.Agent, tt.body)
		if status != tt.wantStatus || errCode(out) != tt.wantCode {
			t.Errorf("%s: %d %v, want %d %q", tt.name, status, out, tt.wantStatus, tt.wantCode)
			continue
		}
		if tt.wantID != uuid.Nil && out["id"] != tt.wantID.String() {
			t.Errorf("%s: answered operation %v, want the existing %s", tt.name, out["id"], tt.wantID)
		}
	}
	var ops int
	if err := p.Pool.QueryRow(ctx, `SELECT count(*) FROM operations`).Scan(&ops); err != nil {
		t.Fatal(err)
	}
	if ops != 3 {
		t.Errorf("%d operations stored, want the 3 made before", ops)
	}
	for _, op := range []ledger.Operation{queued, proposed} {
		if kinds := p.Kinds(op); kinds[len(kinds)-1] != "key_conflict" {
			t.Errorf("%s events = %v, want the conflict recorded", op.Key, kinds)
		}
	}
}

// TestApprovalLastsApprovalTTLUnlessTheApproverSaysTTLSeconds: an
// approval granted on a proposal is valid for the action's approval_ttl
// (a person's and the policy's alike), or for the approver's ttl_seconds
// when given; its policy version is the action's unless the approver
// names one.
func TestApprovalLastsApprovalTTLUnlessTheApproverSaysTTLSeconds(t *testing.T) {
	t.Parallel()
	p := testpipeline.New(t, testpipeline.Options{ActionContract: `approval: {approval_ttl: 30m, policy_version: "2026-11", auto_approve: "params.qty <= 10"}`})
	tests := []struct {
		name, params, approve string
		wantTTL               time.Duration
		wantPolicy            string
	}{
		{"by policy", `{"sku":"T-1","qty":1}`, "", 30 * time.Minute, "2026-11"},
		{"by a person", `{"sku":"T-2","qty":50}`, `{"params_fingerprint":%q}`, 30 * time.Minute, "2026-11"},
		{"by a person with ttl_seconds", `{"sku":"T-3","qty":50}`, `{"params_fingerprint":%q,"ttl_seconds":120,"policy_version":"desk-7"}`, 2 * time.Minute, "desk-7"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, out := p.Propose("po-ttl-"+tt.name, tt.params)
			op := p.Operation(out)
			before := p.Clock.Now()
			if tt.approve != "" {
				status, res := p.Do("POST", "/v1/operations/"+op.ID.String()+"/approve", p.Approver, fmt.Sprintf(tt.approve, op.ParamsFingerprint))
				if status != http.StatusOK {
					t.Fatalf("approve = %d %v", status, res)
				}
			} else {
				before = op.CreatedAt
			}
			var expires time.Time
			var policy string
			if err := p.Pool.QueryRow(context.Background(),
				`SELECT expires_at, policy_version FROM approvals WHERE operation_id = $1`, op.ID).Scan(&expires, &policy); err != nil {
				t.Fatal(err)
			}
			if got := expires.Sub(before); got < tt.wantTTL-5*time.Second || got > tt.wantTTL+5*time.Second {
				t.Errorf("approval valid for %s, want %s", got, tt.wantTTL)
			}
			if policy != tt.wantPolicy {
				t.Errorf("policy_version = %q, want %q", policy, tt.wantPolicy)
			}
		})
	}
}

// TestApprovingAProposalWhoseProviderIsNoLongerConfiguredChangesNothing:
// a proposal made while its action pointed at provider acme, approved after
// the providers file dropped acme (the action now points at beta), cannot
// be bound to the account and environment it would go to. The approve
// answers 422 unknown_provider (a configuration the approver can be told
// about, not an internal error), grants no approval and writes no dispatch
// message; the proposal still waits, and can still be denied.
func TestApprovingAProposalWhoseProviderIsNoLongerConfiguredChangesNothing(t *testing.T) {
	t.Parallel()
	f := setupWithProviders(t, testdb.New(t), fmt.Sprintf(`
providers:
  beta: {base_url: "http://127.0.0.1:9", account: acct_beta, environment: test, create: {path: /v1/orders}}
actions:
  %s: {provider: beta}
`, action))
	ctx := context.Background()
	agent, err := f.tokens.Authenticate(ctx, f.agent)
	if err != nil {
		t.Fatal(err)
	}
	op, _, err := f.store.Propose(ctx, ledger.ProposeRequest{
		TenantID: agent.TenantID, TokenID: agent.TokenID, Action: action, Key: "po-gone",
		Provider: "acme", Params: []byte(`{"sku":"A-1","qty":3}`), RequestTTL: time.Hour,
	})
	if err != nil {
		t.Fatal(err)
	}
	r := f.do(t, "POST", "/v1/operations/"+op.ID.String()+"/approve", f.approver,
		[]byte(fmt.Sprintf(`{"params_fingerprint":%q}`, op.ParamsFingerprint)))
	if r.status != http.StatusUnprocessableEntity || r.errorCode() != "unknown_provider" {
		t.Fatalf("approve = %d %s, want 422 unknown_provider", r.status, r.raw)
	}
	got, err := f.store.Get(ctx, ledger.WholeTenant(agent.TenantID), op.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.Status != ledger.StatusAwaitingApproval || got.Version != op.Version || got.ApprovalID != uuid.Nil {
		t.Errorf("proposal is %s v%d approval %s, want unchanged", got.Status, got.Version, got.ApprovalID)
	}
	if n := f.count(t, "approvals"); n != 0 {
		t.Errorf("%d approvals stored, want none", n)
	}
	if n := f.count(t, "outbox"); n != 0 {
		t.Errorf("%d outbox rows, want none", n)
	}
	r = f.do(t, "POST", "/v1/operations/"+op.ID.String()+"/deny", f.approver, []byte(`{"reason":"the supplier is gone"}`))
	if r.status != http.StatusOK || r.str("status") != "cancelled" {
		t.Errorf("deny = %d %s, want 200 cancelled", r.status, r.raw)
	}
}

// TestConcurrentProposalsApprovedByPolicyMakeOneApprovalAndOneOrder:
// twenty identical proposals at once under a policy that approves them
// make one operation (one 201, the rest 200 replays of it), one approval
// by the policy, and exactly one order at the supplier.
func TestConcurrentProposalsApprovedByPolicyMakeOneApprovalAndOneOrder(t *testing.T) {
	t.Parallel()
	p := testpipeline.New(t, testpipeline.Options{ActionContract: policy})
	p.Start(2)
	id := proposeAtOnce(t, p, 20, "po-auto-race", `{"sku":"A-1","qty":2}`, http.StatusCreated)
	op := p.Operation(map[string]any{"id": id})
	if a := approvalsOf(t, p, op.ID); len(a) != 1 || !strings.HasPrefix(a[0], "policy:2026-11 ") {
		t.Errorf("approvals = %v, want exactly one by policy:2026-11", a)
	}
	p.WaitStatus(op, ledger.StatusSucceeded, 10*time.Second)
	if got := p.Orders(op); got != 1 {
		t.Errorf("supplier has %d orders, want exactly 1", got)
	}
}

// proposeAtOnce sends n identical proposals at once and checks that
// exactly one created the operation (answered created: 202 awaiting a
// decision, 201 when a policy approved it) and every other one is a 200
// replay naming the same operation, whose id it returns.
func proposeAtOnce(t *testing.T, p *testpipeline.Pipeline, n int, key, params string, created int) string {
	t.Helper()
	statuses := make([]int, n)
	ids := make([]string, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			var out map[string]any
			statuses[i], out = p.Propose(key, params)
			ids[i], _ = out["id"].(string)
		})
	}
	wg.Wait()
	made := 0
	for i := range n {
		switch statuses[i] {
		case created:
			made++
		case http.StatusOK:
		default:
			t.Errorf("request %d answered %d", i, statuses[i])
		}
		if ids[i] != ids[0] {
			t.Errorf("request %d names operation %s, request 0 names %s", i, ids[i], ids[0])
		}
	}
	if made != 1 {
		t.Fatalf("%d requests created the proposal, want exactly 1 (statuses %v)", made, statuses)
	}
	return ids[0]
}

// pollProposal is GET /v1/operations/{id}?wait= with If-None-Match "1"
// (a proposal's first version), as an agent waits for the decision: the
// answer's status, ETag and operation status, and how long it took.
func pollProposal(t *testing.T, p *testpipeline.Pipeline, id uuid.UUID, wait string) (code int, etag, status string, took time.Duration) {
	t.Helper()
	req, err := http.NewRequest("GET", p.API.URL+"/v1/operations/"+id.String()+"?wait="+wait, nil)
	if err != nil {
		t.Error(err)
		return
	}
	req.Header.Set("Authorization", "Bearer "+p.Agent)
	req.Header.Set("If-None-Match", `"1"`)
	start := time.Now()
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Error(err)
		return
	}
	defer res.Body.Close()
	var out map[string]any
	_ = json.NewDecoder(res.Body).Decode(&out)
	status, _ = out["status"].(string)
	return res.StatusCode, res.Header.Get("ETag"), status, time.Since(start)
}

// pollAnswer is one answer of pollProposal.
type pollAnswer struct {
	code         int
	etag, status string
	took         time.Duration
}

// approveWhilePolling approves op while a poll of wait waits on it, and
// returns the poll's answer.
func approveWhilePolling(t *testing.T, p *testpipeline.Pipeline, op ledger.Operation, wait string) pollAnswer {
	t.Helper()
	answered := make(chan pollAnswer, 1)
	go func() {
		var a pollAnswer
		a.code, a.etag, a.status, a.took = pollProposal(t, p, op.ID, wait)
		answered <- a
	}()
	// Approve once the poll waits on the watcher. A poll that has begun
	// to wait but not yet read the operation again reads the approved
	// operation at once, which the checks accept too.
	p.Eventually(10*time.Second, "the poll to wait", func() bool { return p.Watcher.Waiting() > 0 })
	if status, out := approve(p, p.Approver, op.ID, op.ParamsFingerprint); status != http.StatusOK {
		t.Fatalf("approve = %d %v", status, out)
	}
	return <-answered
}

// TestLongPollOnAProposalAnswersItsDecision: an agent waiting on its
// proposal (If-None-Match with its ETag, ?wait=) is answered with the new
// view as soon as a person approves it, and with 304 and the same ETag
// when nobody decides within the wait.
func TestLongPollOnAProposalAnswersItsDecision(t *testing.T) {
	t.Parallel()
	p := testpipeline.New(t, testpipeline.Options{})
	p.Start(0) // the watcher (and the rest), no dispatcher: an approved proposal stays queued
	pending := p.Operation(mustPropose(t, p, "po-wait-1"))
	undecided := p.Operation(mustPropose(t, p, "po-wait-2"))

	got := approveWhilePolling(t, p, pending, "30s")
	if got.code != http.StatusOK || got.etag != `"2"` || got.status != string(ledger.StatusQueued) || got.took > 10*time.Second {
		t.Errorf("poll during approval = %d ETag %s status %q after %s, want 200 ETag \"2\" queued at once", got.code, got.etag, got.status, got.took)
	}
	if code, tag, _, _ := pollProposal(t, p, undecided.ID, "1s"); code != http.StatusNotModified || tag != `"1"` {
		t.Errorf("poll on an undecided proposal = %d ETag %s, want 304 ETag \"1\"", code, tag)
	}
}

// TestLongPollThatMissedAChangeAnswersItNotAStale304: a poll whose wake-up
// never came (the process's listening connection is down, here because
// the watcher was never started) still answers truthfully when its wait
// runs out: the operation changed, so the answer is 200 with the new view
// and ETag, never 304 "not modified" with the old one.
func TestLongPollThatMissedAChangeAnswersItNotAStale304(t *testing.T) {
	t.Parallel()
	p := testpipeline.New(t, testpipeline.Options{})
	op := p.Operation(mustPropose(t, p, "po-missed"))
	got := approveWhilePolling(t, p, op, "2s")
	if got.code != http.StatusOK || got.etag != `"2"` || got.status != string(ledger.StatusQueued) {
		t.Errorf("poll = %d ETag %s status %q after %s, want 200 ETag \"2\" queued", got.code, got.etag, got.status, got.took)
	}
}

// A number the ledger would keep as another value (1e-400 is stored as 0)
// is judged as it is kept: the schema and the policy see the canonical
// value, so exclusiveMinimum 0 refuses it, and qty 1e-400 is not an
// approvable "small order" of 0.
func TestSchemaAndPolicyJudgeTheNumberTheLedgerKeeps(t *testing.T) {
	t.Parallel()
	p := testpipeline.New(t, testpipeline.Options{ActionContract: `params_schema: {type: object, properties: {amount: {type: number, exclusiveMinimum: 0}}}, ` +
		`approval: {policy_version: p1, auto_approve: "params.amount > 0.5"}`})
	for i, params := range []string{`{"amount":1e-400}`, `{"amount":-1e-400}`, `{"amount":0}`} {
		status, out := p.Propose(fmt.Sprintf("po-%d", i), params)
		if status != http.StatusUnprocessableEntity || errCode(out) != "invalid_params" {
			t.Errorf("proposal of %s = %d %v, want 422 invalid_params", params, status, out)
		}
	}
	// 0.50000000000000000001 is the double 0.5: the policy sees 0.5, not
	// more, and leaves the proposal to a person.
	if status, out := p.Propose("po-9", `{"amount":0.50000000000000000001}`); status != http.StatusAccepted {
		t.Errorf("proposal of 0.5 written long = %d %v, want 202 awaiting a person", status, out)
	}
}
