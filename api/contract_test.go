package api_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/actledger/actledger/api"
	"github.com/actledger/actledger/auth"
	"github.com/actledger/actledger/internal/testpipeline"
	"github.com/actledger/actledger/ledger"
	"github.com/actledger/actledger/webhook"
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

// TestEveryRouteChecksTokenThenRoleBeforeItsBody: every route that takes
// a token answers 401 unauthenticated without one (or with a bad one) and
// 403 forbidden to a role it does not serve, before it looks at the body:
// an oversized, malformed body changes neither answer.
func TestEveryRouteChecksTokenThenRoleBeforeItsBody(t *testing.T) {
	t.Parallel()
	f := setup(t)
	tokens := map[auth.Role]string{auth.RoleAgent: f.agent, auth.RoleApprover: f.approver, auth.RoleOperator: f.operator,
		auth.RoleMetrics: f.token(t, "acme-corp", auth.RoleMetrics)}
	huge := append([]byte("{"), bytes.Repeat([]byte("x"), api.DefaultMaxBody+1)...)
	for _, rt := range api.Routes() {
		if len(rt.Roles) == 0 {
			continue // unauthenticated
		}
		method, path, _ := strings.Cut(rt.Pattern, " ")
		path = strings.NewReplacer("{id}", "0193a7a0-0000-7000-8000-000000000000").Replace(path)
		if strings.Contains(path, "/evidence/") {
			path = "/v1/review/evidence/1/resolve"
		}
		t.Run(rt.Pattern, func(t *testing.T) {
			for _, token := range []string{"", "alt_forged"} {
				if r := f.do(t, method, path, token, huge); r.status != 401 || r.errorCode() != "unauthenticated" {
					t.Errorf("token %q: %d %s, want 401 unauthenticated", token, r.status, r.raw)
				}
			}
			for role, token := range tokens {
				if slices.Contains(rt.Roles, role) {
					continue
				}
				if r := f.do(t, method, path, token, huge); r.status != 403 || r.errorCode() != "forbidden" {
					t.Errorf("role %s: %d %s, want 403 forbidden", role, r.status, r.raw)
				}
			}
		})
	}
}

// TestEveryJSONBodyRefusesUnknownFieldsAndOversizeBodies: every route
// that reads a JSON body answers 400 unknown_field naming a field it does
// not know, and 413 to a body over 1 MiB (with or without a
// Content-Length).
func TestEveryJSONBodyRefusesUnknownFieldsAndOversizeBodies(t *testing.T) {
	t.Parallel()
	f := setup(t)
	const id = "0193a7a0-0000-7000-8000-000000000000"
	tests := []struct {
		path, token string
	}{
		{"/v1/approvals", f.approver},
		{"/v1/operations", f.agent},
		{"/v1/operations/" + id + "/approve", f.approver},
		{"/v1/operations/" + id + "/deny", f.approver},
		{"/v1/operations/" + id + "/resolve", f.operator},
		{"/v1/operations/" + id + "/retry", f.operator},
		{"/v1/review/evidence/1/resolve", f.operator},
		{"/v1/review/replay", f.operator},
		{"/v1/dispatch/pause", f.operator},
		{"/v1/dispatch/resume", f.operator},
	}
	for _, tt := range tests {
		t.Run(tt.path, func(t *testing.T) {
			if r := f.do(t, "POST", tt.path, tt.token, []byte(`{"typo_field":1}`)); r.status != 400 || r.errorCode() != "unknown_field" ||
				!strings.Contains(r.errorMessage(), "typo_field") {
				t.Errorf("unknown field: %d %s, want 400 unknown_field naming it", r.status, r.raw)
			}
			big := append([]byte(`{"note":"`), bytes.Repeat([]byte("x"), api.DefaultMaxBody)...)
			big = append(big, `"}`...)
			if r := f.do(t, "POST", tt.path, tt.token, big); r.status != 413 || r.errorCode() != "body_too_large" {
				t.Errorf("body over 1 MiB: %d %s, want 413 body_too_large", r.status, r.raw)
			}
			// Chunked: no Content-Length to refuse it by.
			req, err := http.NewRequest("POST", f.srv.URL+tt.path, io.MultiReader(bytes.NewReader(big)))
			if err != nil {
				t.Fatal(err)
			}
			req.Header.Set("Authorization", "Bearer "+tt.token)
			if r := send(t, req); r.status != 413 || r.errorCode() != "body_too_large" {
				t.Errorf("chunked body over 1 MiB: %d %s, want 413 body_too_large", r.status, r.raw)
			}
		})
	}
}

// TestKeyOmittedReplaysUnderTheApprovalsID: an operation without a key
// takes its approval's id as key, so the same request again is a replay
// of it (200, Idempotent-Replayed), never a second operation.
func TestKeyOmittedReplaysUnderTheApprovalsID(t *testing.T) {
	t.Parallel()
	f := setup(t)
	approval := f.approve(t, `{"sku":"A-1"}`, `,"max_uses":2`)
	first := f.do(t, "POST", "/v1/operations", f.agent, opBody("", `{"sku":"A-1"}`, approval))
	again := f.do(t, "POST", "/v1/operations", f.agent, opBody("", `{ "sku": "A-1" }`, approval))
	if first.status != 201 || again.status != 200 || again.header.Get("Idempotent-Replayed") != "true" || again.str("id") != first.str("id") {
		t.Errorf("first %d %s; again %d %v %s; want 201 then a 200 replay of it", first.status, first.raw, again.status, again.header, again.raw)
	}
	changed := f.do(t, "POST", "/v1/operations", f.agent, opBody("", `{"sku":"A-2"}`, approval))
	if changed.status != 409 || changed.errorCode() != "key_reused_with_different_params" {
		t.Errorf("other params without key: %d %s, want 409", changed.status, changed.raw)
	}
	if n := f.count(t, "operations"); n != 1 {
		t.Errorf("operations = %d, want 1", n)
	}
}

// TestEventsHaveTheContractsShape: GET /v1/operations/{id}/events answers
// {"events":[{"seq","at","kind","from","to","actor","detail"}]}, the first
// event from null, times in RFC 3339 UTC.
func TestEventsHaveTheContractsShape(t *testing.T) {
	t.Parallel()
	f := setup(t)
	id := f.queuedOperation(t, "po-ev")
	r := f.do(t, "GET", "/v1/operations/"+id+"/events", f.agent, nil)
	events, _ := r.body["events"].([]any)
	if r.status != 200 || len(events) != 1 {
		t.Fatalf("events: %d %s", r.status, r.raw)
	}
	e := events[0].(map[string]any)
	for _, field := range []string{"seq", "at", "kind", "from", "to", "actor", "detail"} {
		if _, ok := e[field]; !ok {
			t.Errorf("field %s missing from %v", field, e)
		}
	}
	if e["from"] != nil || e["to"] != "queued" || e["kind"] != "created" || !isRFC3339UTC(fmt.Sprint(e["at"])) {
		t.Errorf("first event = %v, want created from null to queued at an RFC 3339 UTC time", e)
	}
}

// TestDecidingTwiceOrWithoutAFingerprint: a second deny, or an approve
// after a deny, answers 409 not_awaiting_approval; an approve without
// params_fingerprint is a 400 naming it.
func TestDecidingTwiceOrWithoutAFingerprint(t *testing.T) {
	t.Parallel()
	p := testpipeline.New(t, testpipeline.Options{})
	op := p.Operation(mustPropose(t, p, "po-d1"))
	path := "/v1/operations/" + op.ID.String()
	if status, out := p.Do("POST", path+"/approve", p.Approver, `{}`); status != 400 || errCode(out) != "invalid_field" {
		t.Errorf("approve without fingerprint = %d %v, want 400 invalid_field", status, out)
	}
	if status, out := p.Do("POST", path+"/deny", p.Approver, `{"reason":"no"}`); status != 200 {
		t.Fatalf("deny = %d %v", status, out)
	}
	if status, out := p.Do("POST", path+"/deny", p.Approver, `{"reason":"no"}`); status != 409 || errCode(out) != "not_awaiting_approval" {
		t.Errorf("second deny = %d %v, want 409 not_awaiting_approval", status, out)
	}
}

// TestIntegersBeyondTwoToThe53InFloatNotationAreRefusedToo: an integer
// beyond ±2^53 written with a fraction or an exponent
// (9007199254740993.0, 9007199254740993e0) is canonicalised to another
// integer (9007199254740992) and would share 2^53's fingerprint; it is
// refused like the plain literal. A number whose canonical form keeps its
// value (1e21, 1e300, 2^53 written 9007199254740992.0) and a non-integer
// (RFC 8785 float semantics) pass.
func TestIntegersBeyondTwoToThe53InFloatNotationAreRefusedToo(t *testing.T) {
	t.Parallel()
	f := setup(t)
	body := func(params string) []byte {
		return []byte(fmt.Sprintf(`{"action":%q,"params":%s,"ttl_seconds":60,"policy_version":"p1"}`, action, params))
	}
	for _, params := range []string{
		`{"n":9007199254740993.0}`, `{"n":9007199254740993e0}`, `{"n":90071992547409930e-1}`, `{"n":-9007199254740993.00}`,
		`{"n":18446744073709551616.0}`, `{"n":1.2345678901234567891E19}`, `{"a":[{"n":123456789012345678.0}]}`,
	} {
		r := f.do(t, "POST", "/v1/approvals", f.approver, body(params))
		if r.status != 400 || r.errorCode() != "invalid_field" || !strings.Contains(r.errorMessage(), "as a string") {
			t.Errorf("%s: %d %s, want 400 invalid_field with the hint to send a string", params, r.status, r.raw)
		}
	}
	for _, params := range []string{
		`{"n":9007199254740992.0}`, `{"n":1e16}`, `{"n":1.0e21}`, `{"n":1e300}`, `{"n":123456789012345678901234.5}`,
		`{"n":0.1}`, `{"n":-0.0}`, `{"n":1e-400}`, `{"n":12.50}`,
	} {
		if r := f.do(t, "POST", "/v1/approvals", f.approver, body(params)); r.status != 201 {
			t.Errorf("%s: %d %s, want 201", params, r.status, r.raw)
		}
	}
}

// TestNumericFieldsOutOfRangeAnswer400: a numeric field outside what the
// ledger can store is a 400 naming it, never a 500.
func TestNumericFieldsOutOfRangeAnswer400(t *testing.T) {
	t.Parallel()
	f := setup(t)
	for _, body := range []string{
		fmt.Sprintf(`{"action":%q,"params":{},"ttl_seconds":60,"policy_version":"p1","max_uses":2147483648}`, action),
		fmt.Sprintf(`{"action":%q,"params":{},"ttl_seconds":60,"policy_version":"p1","max_uses":9007199254740993}`, action),
		fmt.Sprintf(`{"action":%q,"params":{},"expires_at":"9999-12-31T23:59:59Z","policy_version":"p1"}`, action),
		fmt.Sprintf(`{"action":%q,"params":{},"expires_at":"0001-01-01T00:00:00Z","policy_version":"p1"}`, action),
	} {
		if r := f.do(t, "POST", "/v1/approvals", f.approver, []byte(body)); r.status != 400 || r.errorCode() != "invalid_field" {
			t.Errorf("%s: %d %s, want 400 invalid_field", body, r.status, r.raw)
		}
	}
}

// TestWaitIsAtMostSixtySeconds: ?wait= beyond 60 s is a 400, and a wait
// with an If-None-Match that no longer matches answers at once.
func TestWaitIsAtMostSixtySeconds(t *testing.T) {
	t.Parallel()
	f := setup(t)
	id := f.queuedOperation(t, "po-w")
	for _, wait := range []string{"61s", "61", "2m", "-1s", "soon"} {
		req, _ := http.NewRequest("GET", f.srv.URL+"/v1/operations/"+id+"?wait="+wait, nil)
		req.Header.Set("Authorization", "Bearer "+f.agent)
		req.Header.Set("If-None-Match", `"1"`)
		if r := send(t, req); r.status != 400 || r.errorCode() != "invalid_query" {
			t.Errorf("wait=%s: %d %s, want 400 invalid_query", wait, r.status, r.raw)
		}
	}
	req, _ := http.NewRequest("GET", f.srv.URL+"/v1/operations/"+id+"?wait=60s", nil)
	req.Header.Set("Authorization", "Bearer "+f.agent)
	req.Header.Set("If-None-Match", `"0"`)
	start := time.Now()
	if r := send(t, req); r.status != 200 || r.header.Get("ETag") != `"1"` || time.Since(start) > 5*time.Second {
		t.Errorf("stale If-None-Match with wait=60s: %d %v after %s, want 200 with ETag \"1\" at once", r.status, r.header, time.Since(start))
	}
}

// TestDispatchStateIsTheTokensTenantsOnly: a pause, and the calls in
// flight GET /v1/dispatch lists, are the operator's tenant's; another
// tenant's operator neither sees nor lifts them.
func TestDispatchStateIsTheTokensTenantsOnly(t *testing.T) {
	t.Parallel()
	f := setup(t)
	id := f.queuedOperation(t, "po-inflight")
	if _, err := f.store.Transition(context.Background(), ledger.Change{
		ID: uuid.MustParse(id), From: ledger.StatusQueued, Version: 1, To: ledger.StatusDispatching, Kind: "claimed",
		Actor: "worker:test", LeaseOwner: "worker:test", LeaseUntil: f.clock.Now().Add(time.Minute),
	}); err != nil {
		t.Fatal(err)
	}
	if r := f.do(t, "POST", "/v1/dispatch/pause", f.operator, []byte(`{}`)); r.status != 200 {
		t.Fatalf("pause: %d %s", r.status, r.raw)
	}
	outsider := f.token(t, "globex", auth.RoleOperator)
	r := f.do(t, "GET", "/v1/dispatch", outsider, nil)
	if paused, _ := r.body["paused"].([]any); r.status != 200 || len(paused) != 0 {
		t.Errorf("another tenant sees pauses: %d %s", r.status, r.raw)
	}
	if inFlight, _ := r.body["in_flight"].([]any); len(inFlight) != 0 {
		t.Errorf("another tenant sees calls in flight: %s", r.raw)
	}
	if r := f.do(t, "POST", "/v1/dispatch/resume", outsider, []byte(`{}`)); r.status != 200 || r.body["removed"] != float64(0) {
		t.Errorf("another tenant's resume: %d %s, want 200 removing nothing", r.status, r.raw)
	}
	mine := f.do(t, "GET", "/v1/dispatch", f.operator, nil)
	paused, _ := mine.body["paused"].([]any)
	inFlight, _ := mine.body["in_flight"].([]any)
	if len(paused) != 1 || len(inFlight) != 1 {
		t.Fatalf("own dispatch state: %s, want one pause and one call in flight", mine.raw)
	}
	call := inFlight[0].(map[string]any)
	if call["operation_id"] != id || call["age_seconds"] == nil || !isRFC3339UTC(fmt.Sprint(call["claimed_at"])) {
		t.Errorf("call in flight = %v, want the operation with its age", call)
	}
}

// TestConcurrentOperatorDecisionsOneWinsTheRestAre409: of operators
// resolving (or retrying) one operation at once, exactly one changes it;
// the others are told it is no longer in a state they may decide (409),
// never an internal error.
func TestConcurrentOperatorDecisionsOneWinsTheRestAre409(t *testing.T) {
	t.Parallel()
	f := setup(t)
	tests := []struct {
		name, path, body, code string
		status                 ledger.Status // the operation's state before the decisions
	}{
		{"resolve", "/resolve", `{"outcome":"cancelled","note":"race"}`, "not_resolvable", ledger.StatusQueued},
		{"retry", "/retry", `{"note":"race"}`, "retry_not_allowed", ledger.StatusFailed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			id := f.queuedOperation(t, "po-race-"+tt.name)
			if tt.status == ledger.StatusFailed {
				f.move(t, id, ledger.StatusFailed, time.Time{})
			}
			const n = 8
			answers := make([]response, n)
			var wg sync.WaitGroup
			for i := range n {
				wg.Go(func() {
					answers[i] = f.do(t, "POST", "/v1/operations/"+id+tt.path, f.operator, []byte(tt.body))
				})
			}
			wg.Wait()
			won := 0
			for _, r := range answers {
				switch {
				case r.status == 200:
					won++
				case r.status == 409 && r.errorCode() == tt.code:
				default:
					t.Errorf("concurrent %s: %d %s, want 200 or 409 %s", tt.name, r.status, r.raw, tt.code)
				}
			}
			if won != 1 {
				t.Errorf("%d of %d won, want exactly 1", won, n)
			}
		})
	}
}

// TestReviewFactsKeepLargeIntegersExactly: a provider's evidence is shown
// to the operator as it was stored; an integer beyond 2^53 in a webhook's
// data is listed in GET /v1/review digit for digit, never rounded.
func TestReviewFactsKeepLargeIntegersExactly(t *testing.T) {
	t.Parallel()
	p := testpipeline.New(t, testpipeline.Options{})
	p.Start(0)
	body := []byte(`{"event_id":"evt-big","type":"order.created","reference":"al_unknown","provider_reference":"ord_9",` +
		`"status":"succeeded","data":{"amount":12345678901234567891}}`)
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
	var raw string
	p.Eventually(10*time.Second, "the unmatched evidence in review", func() bool {
		req, _ := http.NewRequest("GET", p.API.URL+"/v1/review", nil)
		req.Header.Set("Authorization", "Bearer "+p.Operator)
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		raw = string(b)
		return strings.Contains(raw, "evidence_id")
	})
	if !strings.Contains(raw, `"amount":12345678901234567891`) {
		t.Errorf("review = %s, want the amount 12345678901234567891 exactly", raw)
	}
}

// TestRevokeHoldsUnsentWorkAndAnswers200Again: a revoke answers 200 and
// holds the operations under the approval that were never sent (their
// summary says so); revoking it again answers 200 and changes nothing.
func TestRevokeHoldsUnsentWorkAndAnswers200Again(t *testing.T) {
	t.Parallel()
	f := setup(t)
	approval := f.approve(t, `{"sku":"A-1"}`, `,"max_uses":2`)
	queued := f.do(t, "POST", "/v1/operations", f.agent, opBody("po-1", `{"sku":"A-1"}`, approval)).str("id")
	waiting := f.do(t, "POST", "/v1/operations", f.agent, opBody("po-2", `{"sku":"A-1"}`, approval)).str("id")
	f.move(t, waiting, ledger.StatusRetryWait, f.clock.Now().Add(time.Minute))
	r := f.do(t, "POST", "/v1/approvals/"+approval+"/revoke", f.approver, nil)
	held, _ := r.body["held_operations"].([]any)
	if r.status != 200 || len(held) != 2 {
		t.Fatalf("revoke: %d %s, want 200 holding both", r.status, r.raw)
	}
	for _, id := range []string{queued, waiting} {
		op := f.getOperation(t, id)
		if op["status"] != "held" || !strings.Contains(fmt.Sprint(op["summary"]), "not sent") {
			t.Errorf("%s after revoke: %v %q, want held saying it was not sent", id, op["status"], op["summary"])
		}
	}
	again := f.do(t, "POST", "/v1/approvals/"+approval+"/revoke", f.approver, nil)
	if held, _ := again.body["held_operations"].([]any); again.status != 200 || len(held) != 0 {
		t.Errorf("second revoke: %d %s, want 200 holding nothing", again.status, again.raw)
	}
}
