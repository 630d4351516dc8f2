package api_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/actledger/actledger/auth"
	"github.com/actledger/actledger/internal/testpipeline"
	"github.com/actledger/actledger/ledger"
)

// TestApprovingARequestPastItsTTLIsRefusedBeforeTheSweep: a proposal past
// request_ttl is held whether or not the sweep that marks it has run yet;
// an approval that arrives in between answers 409 not_awaiting_approval,
// grants nothing and writes no dispatch message.
func TestApprovingARequestPastItsTTLIsRefusedBeforeTheSweep(t *testing.T) {
	t.Parallel()
	// Nothing is started: no sweep holds the lapsed proposal.
	p := testpipeline.New(t, testpipeline.Options{ActionContract: `approval: {request_ttl: 1h}`})
	_, out := p.Propose("po-lapsed", `{"sku":"A-1","qty":3}`)
	op := p.Operation(out)
	denied := p.Operation(mustPropose(t, p, "po-lapsed-deny"))
	mustPropose(t, p, "po-lapsed-listed")
	p.Clock.Advance(2 * time.Hour)

	if status, out := approve(p, p.Approver, op.ID, op.ParamsFingerprint); status != http.StatusConflict || errCode(out) != "not_awaiting_approval" {
		t.Errorf("approve past request_ttl = %d %v, want 409 not_awaiting_approval", status, out)
	}
	if status, out := p.Do("POST", "/v1/operations/"+denied.ID.String()+"/deny", p.Approver, `{"reason":"late"}`); status != http.StatusConflict || errCode(out) != "not_awaiting_approval" {
		t.Errorf("deny past request_ttl = %d %v, want 409 not_awaiting_approval", status, out)
	}
	if a := approvalsOf(t, p, op.ID); len(a) != 0 {
		t.Errorf("approvals %v granted to a lapsed proposal", a)
	}
	if n := dispatchRows(t, p, op.ID); n != 0 {
		t.Errorf("%d dispatch messages for a lapsed proposal, want none", n)
	}
	_, list := p.Do("GET", "/v1/approval-requests", p.Approver, "")
	if items, _ := list["items"].([]any); len(items) != 0 {
		t.Errorf("approval requests past request_ttl = %v, want none pending", items)
	}
}

func mustPropose(t *testing.T, p *testpipeline.Pipeline, key string) map[string]any {
	t.Helper()
	status, out := p.Propose(key, `{"sku":"A-1","qty":3}`)
	if status != http.StatusAccepted {
		t.Fatalf("propose %s = %d %v", key, status, out)
	}
	return out
}

// TestEveryRouteAnswersForeignIDsExactlyLikeMissingOnes: for every route
// that names an object, another tenant's id answers the same 404 body as
// an id that does not exist, and changes nothing.
func TestEveryRouteAnswersForeignIDsExactlyLikeMissingOnes(t *testing.T) {
	t.Parallel()
	p := testpipeline.New(t, testpipeline.Options{})
	proposal := p.Operation(mustPropose(t, p, "po-foreign"))
	queued := p.Enqueue("po-queued", `{"sku":"A-2","qty":1}`)
	approval := p.Approve(`{"sku":"A-3","qty":1}`, time.Hour)
	const missing = "0193a7a0-0000-7000-8000-000000000000"
	other := "Globex"
	tokens := map[auth.Role]string{
		auth.RoleAgent:    p.TokenFor(other, auth.RoleAgent),
		auth.RoleApprover: p.TokenFor(other, auth.RoleApprover),
		auth.RoleOperator: p.TokenFor(other, auth.RoleOperator),
	}
	tests := []struct {
		name, method, path, body string
		role                     auth.Role
		id                       string
	}{
		{"get", "GET", "/v1/operations/%s", "", auth.RoleAgent, queued.ID.String()},
		{"events", "GET", "/v1/operations/%s/events", "", auth.RoleOperator, queued.ID.String()},
		{"approve", "POST", "/v1/operations/%s/approve", fmt.Sprintf(`{"params_fingerprint":%q}`, proposal.ParamsFingerprint), auth.RoleApprover, proposal.ID.String()},
		{"deny", "POST", "/v1/operations/%s/deny", `{"reason":"no"}`, auth.RoleApprover, proposal.ID.String()},
		{"resolve", "POST", "/v1/operations/%s/resolve", `{"outcome":"cancelled","note":"x"}`, auth.RoleOperator, queued.ID.String()},
		{"retry", "POST", "/v1/operations/%s/retry", `{}`, auth.RoleOperator, queued.ID.String()},
		{"revoke", "POST", "/v1/approvals/%s/revoke", "", auth.RoleApprover, approval.ID.String()},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fs, fo := p.Do(tt.method, fmt.Sprintf(tt.path, tt.id), tokens[tt.role], tt.body)
			ms, mo := p.Do(tt.method, fmt.Sprintf(tt.path, missing), tokens[tt.role], tt.body)
			if fs != http.StatusNotFound || fmt.Sprint(fo) != fmt.Sprint(mo) || ms != fs {
				t.Errorf("foreign id: %d %v; missing id: %d %v; want the same 404", fs, fo, ms, mo)
			}
		})
	}
	if got := p.Get(proposal); got.Status != ledger.StatusAwaitingApproval || got.Version != proposal.Version {
		t.Errorf("proposal is %s v%d after another tenant's requests", got.Status, got.Version)
	}
	if got := p.Get(queued); got.Status != ledger.StatusQueued || got.Version != queued.Version {
		t.Errorf("operation is %s v%d after another tenant's requests", got.Status, got.Version)
	}
}

// TestProposalKeysReplayAndConflictLikeApprovedOnes: a proposal's key
// behaves as any operation's: the same key and params replay (200,
// Idempotent-Replayed, ETag), whichever way the key was first used, and
// other params are a 409.
func TestProposalKeysReplayAndConflictLikeApprovedOnes(t *testing.T) {
	t.Parallel()
	p := testpipeline.New(t, testpipeline.Options{})
	params := `{"sku":"A-1","qty":3}`
	first := p.Operation(mustPropose(t, p, "po-r1"))
	approved := p.Enqueue("po-r2", params)
	a := p.Approve(params, time.Hour)
	withApproval := func(key, params string) string {
		return fmt.Sprintf(`{"action":%q,"key":%q,"params":%s,"approval_id":%q}`, testpipeline.Action, key, params, a.ID)
	}
	tests := []struct {
		name, body string
		status     int
		code, id   string
	}{
		{"proposal replayed", proposalBody("po-r1", `{"qty":3,"sku":"A-1"}`), 200, "", first.ID.String()},
		{"proposal key replayed with an approval", withApproval("po-r1", params), 200, "", first.ID.String()},
		{"approved key replayed as a proposal", proposalBody("po-r2", params), 200, "", approved.ID.String()},
		{"proposal key with other params", proposalBody("po-r1", `{"sku":"A-1","qty":4}`), 409, "key_reused_with_different_params", ""},
		{"approved key proposed with other params", proposalBody("po-r2", `{"sku":"A-1","qty":4}`), 409, "key_reused_with_different_params", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			status, h, out := doWithHeader(t, p, "POST", "/v1/operations", p.Agent, tt.body)
			if status != tt.status || errCode(out) != tt.code {
				t.Fatalf("got %d %v, want %d %s", status, out, tt.status, tt.code)
			}
			if tt.status != 200 {
				return
			}
			if out["id"] != tt.id || h.Get("Idempotent-Replayed") != "true" || h.Get("ETag") == "" {
				t.Errorf("replay: id %v, headers %v; want %s, Idempotent-Replayed: true and an ETag", out["id"], h, tt.id)
			}
		})
	}
	if a := approvalsOf(t, p, first.ID); len(a) != 0 {
		t.Errorf("a replay approved the proposal: %v", a)
	}
	if got := p.Get(first); got.Status != ledger.StatusAwaitingApproval {
		t.Errorf("proposal is %s after replays, want awaiting_approval", got.Status)
	}
}

func proposalBody(key, params string) string {
	return fmt.Sprintf(`{"action":%q,"key":%q,"params":%s,"request_approval":true}`, testpipeline.Action, key, params)
}

// doWithHeader is Pipeline.Do that also returns the answer's headers.
func doWithHeader(t *testing.T, p *testpipeline.Pipeline, method, path, token, body string) (int, http.Header, map[string]any) {
	t.Helper()
	req, err := http.NewRequest(method, p.API.URL+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+token)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	var out map[string]any
	_ = json.NewDecoder(res.Body).Decode(&out)
	return res.StatusCode, res.Header, out
}

// TestDecisionsAnswerTheOperationViewWithItsETag: approve and deny answer
// 200 with the operation view and its ETag, as every operation view does.
func TestDecisionsAnswerTheOperationViewWithItsETag(t *testing.T) {
	t.Parallel()
	p := testpipeline.New(t, testpipeline.Options{})
	toApprove := p.Operation(mustPropose(t, p, "po-e1"))
	toDeny := p.Operation(mustPropose(t, p, "po-e2"))
	for name, req := range map[string]struct {
		path, body string
		op         ledger.Operation
	}{
		"approve": {"/v1/operations/" + toApprove.ID.String() + "/approve", fmt.Sprintf(`{"params_fingerprint":%q}`, toApprove.ParamsFingerprint), toApprove},
		"deny":    {"/v1/operations/" + toDeny.ID.String() + "/deny", `{"reason":"not now"}`, toDeny},
	} {
		status, h, _ := doWithHeader(t, p, "POST", req.path, p.Approver, req.body)
		now := p.Get(req.op)
		if status != 200 || h.Get("ETag") != strconv.Quote(strconv.FormatInt(now.Version, 10)) {
			t.Errorf("%s: %d ETag %q, want 200 and ETag of version %d", name, status, h.Get("ETag"), now.Version)
		}
	}
}

// TestApprovalRequestItemsHaveEveryContractField: each item of GET
// /v1/approval-requests carries every field the contract lists, times in
// RFC 3339 UTC.
func TestApprovalRequestItemsHaveEveryContractField(t *testing.T) {
	t.Parallel()
	p := testpipeline.New(t, testpipeline.Options{})
	mustPropose(t, p, "po-f1")
	_, list := p.Do("GET", "/v1/approval-requests", p.Approver, "")
	items, _ := list["items"].([]any)
	if len(items) != 1 {
		t.Fatalf("items = %v", list)
	}
	item := items[0].(map[string]any)
	for _, field := range []string{"operation_id", "action", "key", "params", "params_fingerprint", "reason", "requested_by",
		"provider", "account", "environment", "age_seconds", "expires_at", "summary"} {
		if v, ok := item[field]; !ok || v == nil || v == "" {
			t.Errorf("field %s is %v in %v", field, v, item)
		}
	}
	if s, _ := item["expires_at"].(string); !isRFC3339UTC(s) {
		t.Errorf("expires_at = %q, want RFC 3339 UTC", s)
	}
}

func isRFC3339UTC(s string) bool {
	_, err := time.Parse(time.RFC3339, s)
	return err == nil && len(s) > 0 && s[len(s)-1] == 'Z'
}
