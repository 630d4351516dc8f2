package api_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/actledger/actledger/auth"
	"github.com/actledger/actledger/internal/testpipeline"
	"github.com/actledger/actledger/ledger"
)

// scopes is a pipeline whose tenant has tokens of two access scopes,
// supply-eu and supply-us, of every role, beside its tokens of the whole
// tenant (Pipeline.Agent, Approver, Operator).
type scopes struct {
	p      *testpipeline.Pipeline
	eu, us map[auth.Role]string
}

func setupScopes(t *testing.T, opts testpipeline.Options) *scopes {
	t.Helper()
	p := testpipeline.New(t, opts)
	s := &scopes{p: p, eu: map[auth.Role]string{}, us: map[auth.Role]string{}}
	for _, role := range []auth.Role{auth.RoleAgent, auth.RoleApprover, auth.RoleOperator} {
		s.eu[role] = p.ScopedToken("supply-eu", role)
		s.us[role] = p.ScopedToken("supply-us", role)
	}
	return s
}

// enqueue asks for key under a new approval of the whole tenant, as the
// agent whose token is agent; it returns the operation.
func (s *scopes) enqueue(t *testing.T, agent, key, params string) ledger.Operation {
	t.Helper()
	a := s.p.Approve(params, time.Hour)
	status, out := s.p.Do("POST", "/v1/operations", agent,
		fmt.Sprintf(`{"action":%q,"key":%q,"params":%s,"approval_id":%q}`, testpipeline.Action, key, params, a.ID))
	if status != http.StatusCreated {
		t.Fatalf("enqueue %s: %d %v", key, status, out)
	}
	return s.p.Operation(out)
}

// propose proposes key as the agent whose token is agent.
func (s *scopes) propose(t *testing.T, agent, key string) ledger.Operation {
	t.Helper()
	status, out := s.p.Do("POST", "/v1/operations", agent, proposalBody(key, `{"sku":"A-1","qty":3}`))
	if status != http.StatusAccepted {
		t.Fatalf("propose %s: %d %v", key, status, out)
	}
	return s.p.Operation(out)
}

// move makes op change state as the pipeline would (review, a claim).
func (s *scopes) move(t *testing.T, op ledger.Operation, c ledger.Change) ledger.Operation {
	t.Helper()
	c.ID, c.From, c.Version, c.Kind, c.Actor = op.ID, op.Status, op.Version, "test", "test"
	moved, err := s.p.Store.Transition(context.Background(), c)
	if err != nil {
		t.Fatal(err)
	}
	return moved
}

func (s *scopes) inReview(t *testing.T, agent, key string) ledger.Operation {
	t.Helper()
	return s.move(t, s.enqueue(t, agent, key, `{"sku":"R-1"}`), ledger.Change{To: ledger.StatusReview,
		Review: &ledger.Review{Reason: ledger.ReasonOutcomeUnknown, Owner: "supply-ops", Deadline: time.Now().Add(time.Hour)}})
}

// unmatched records evidence of an effect no operation explains, for the
// pipeline's tenant.
func (s *scopes) unmatched(t *testing.T, reference string) int64 {
	t.Helper()
	ctx := context.Background()
	if _, err := s.p.Store.RecordUnmatched(ctx, ledger.Unmatched{
		TenantID: &s.p.TenantID, Provider: "acme", Source: "webhook:" + reference, Reference: reference,
		Status: ledger.EvidenceSucceeded, Owner: "supply-ops", Deadline: time.Now().Add(time.Hour),
	}, s.p.Tenant); err != nil {
		t.Fatal(err)
	}
	var id int64
	if err := s.p.Pool.QueryRow(ctx, `SELECT id FROM unmatched_evidence WHERE reference = $1`, reference).Scan(&id); err != nil {
		t.Fatal(err)
	}
	return id
}

// doWithHeaders is Pipeline.Do with extra request headers.
func doWithHeaders(t *testing.T, p *testpipeline.Pipeline, method, path, token, body string, headers map[string]string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(method, p.API.URL+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+token)
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	var b strings.Builder
	sc := bufio.NewScanner(res.Body)
	for sc.Scan() {
		b.WriteString(sc.Text())
	}
	return res.StatusCode, b.String()
}

// TestEveryRouteAnswersAnotherScopesIDsExactlyLikeMissingOnes: inside one
// tenant, a token of scope supply-us names supply-eu's operations,
// proposal, review item and approval on every route that names an object
// (read, wait, decide, resolve, retry, revoke) and gets the very answer an
// id that does not exist gets, a 404, and nothing changes; unmatched
// evidence, which has no scope, is likewise no scope's to see. A token of
// the whole tenant, asked the same, is answered (it sees every scope), as
// is supply-eu's own.
func TestEveryRouteAnswersAnotherScopesIDsExactlyLikeMissingOnes(t *testing.T) {
	t.Parallel()
	s := setupScopes(t, testpipeline.Options{})
	p := s.p
	queued := s.enqueue(t, s.eu[auth.RoleAgent], "po-eu-queued", `{"sku":"A-2","qty":1}`)
	proposal := s.propose(t, s.eu[auth.RoleAgent], "po-eu-proposal")
	review := s.inReview(t, s.eu[auth.RoleAgent], "po-eu-review")
	status, out := p.Do("POST", "/v1/approvals", s.eu[auth.RoleApprover],
		fmt.Sprintf(`{"action":%q,"params":{"sku":"A-3","qty":1},"ttl_seconds":3600,"policy_version":"p1"}`, testpipeline.Action))
	if status != http.StatusCreated || out["scope"] != "supply-eu" {
		t.Fatalf("supply-eu's approval: %d %v, want 201 with scope supply-eu", status, out)
	}
	approval := fmt.Sprint(out["id"])
	evidence := fmt.Sprint(s.unmatched(t, "ref-nobody"))
	const missing = "0193a7a0-0000-7000-8000-000000000000"
	wait := map[string]string{"If-None-Match": fmt.Sprintf(`"%d"`, queued.Version)}

	tests := []struct {
		name, method, path, body string
		role                     auth.Role
		id, missing              string
		headers                  map[string]string
		// ownerSees: supply-eu's own token is answered too (not for
		// evidence, which no scope sees).
		ownerSees bool
	}{
		{"get", "GET", "/v1/operations/%s", "", auth.RoleAgent, queued.ID.String(), missing, nil, true},
		{"get as an operator", "GET", "/v1/operations/%s", "", auth.RoleOperator, review.ID.String(), missing, nil, true},
		{"wait", "GET", "/v1/operations/%s?wait=1s", "", auth.RoleAgent, queued.ID.String(), missing, wait, true},
		{"by key", "GET", "/v1/operations?action=" + url.QueryEscape(testpipeline.Action) + "&key=%s", "", auth.RoleAgent, queued.Key, "po-missing", nil, true},
		{"events", "GET", "/v1/operations/%s/events", "", auth.RoleAgent, queued.ID.String(), missing, nil, true},
		{"events, a page", "GET", "/v1/operations/%s/events?limit=1", "", auth.RoleOperator, review.ID.String(), missing, nil, true},
		{"approve", "POST", "/v1/operations/%s/approve", fmt.Sprintf(`{"params_fingerprint":%q}`, proposal.ParamsFingerprint), auth.RoleApprover, proposal.ID.String(), missing, nil, false},
		{"deny", "POST", "/v1/operations/%s/deny", `{"reason":"no"}`, auth.RoleApprover, proposal.ID.String(), missing, nil, false},
		{"resolve", "POST", "/v1/operations/%s/resolve", `{"outcome":"cancelled","note":"x"}`, auth.RoleOperator, review.ID.String(), missing, nil, false},
		{"retry", "POST", "/v1/operations/%s/retry", `{}`, auth.RoleOperator, queued.ID.String(), missing, nil, false},
		{"revoke", "POST", "/v1/approvals/%s/revoke", "", auth.RoleApprover, approval, missing, nil, false},
		{"resolve evidence", "POST", "/v1/review/evidence/%s/resolve", `{"note":"x"}`, auth.RoleOperator, evidence, "999999", nil, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fs, fo := doWithHeaders(t, p, tt.method, fmt.Sprintf(tt.path, tt.id), s.us[tt.role], tt.body, tt.headers)
			ms, mo := doWithHeaders(t, p, tt.method, fmt.Sprintf(tt.path, tt.missing), s.us[tt.role], tt.body, tt.headers)
			if fs != http.StatusNotFound || fo != mo || ms != fs {
				t.Errorf("another scope's id: %d %s; missing id: %d %s; want the same 404", fs, fo, ms, mo)
			}
			if tt.name == "resolve evidence" {
				// Evidence is no scope's: supply-eu is told the same.
				if es, eo := doWithHeaders(t, p, tt.method, fmt.Sprintf(tt.path, tt.id), s.eu[tt.role], tt.body, nil); es != fs || eo != fo {
					t.Errorf("supply-eu resolves unmatched evidence: %d %s, want %d %s", es, eo, fs, fo)
				}
			}
			if tt.ownerSees {
				if os, oo := doWithHeaders(t, p, tt.method, fmt.Sprintf(tt.path, tt.id), s.eu[tt.role], tt.body, tt.headers); os == http.StatusNotFound {
					t.Errorf("supply-eu's own token: %d %s, want it answered", os, oo)
				}
			}
		})
	}
	for name, op := range map[string]ledger.Operation{"proposal": proposal, "queued": queued, "review": review} {
		if got := p.Get(op); got.Status != op.Status || got.Version != op.Version {
			t.Errorf("%s is %s v%d after another scope's requests, want %s v%d", name, got.Status, got.Version, op.Status, op.Version)
		}
	}
	var revoked, resolved bool
	if err := p.Pool.QueryRow(context.Background(), `SELECT
    (SELECT revoked_at IS NOT NULL FROM approvals WHERE id = $1),
    (SELECT resolved_at IS NOT NULL FROM unmatched_evidence WHERE id = $2)`, approval, evidence).Scan(&revoked, &resolved); err != nil || revoked || resolved {
		t.Errorf("approval revoked %v, evidence resolved %v (%v) after other scopes' requests; want neither", revoked, resolved, err)
	}

	// The whole tenant sees every scope: each route answers it (a decision
	// it may not take is a 409, never a 404).
	whole := map[auth.Role]string{auth.RoleAgent: p.Agent, auth.RoleApprover: p.Approver, auth.RoleOperator: p.Operator}
	for _, tt := range tests {
		if status, out := doWithHeaders(t, p, tt.method, fmt.Sprintf(tt.path, tt.id), whole[tt.role], tt.body, tt.headers); status == http.StatusNotFound {
			t.Errorf("%s by the whole tenant: %d %s, want it answered", tt.name, status, out)
		}
	}
}

// TestListsAndTheirPagesShowEachScopeItsOwnItemsOnly: the lists (the
// operations, the approval requests, the review queue, the calls in
// flight), followed page by page through next_cursor one item at a time,
// hold exactly a scope's own items, never one of the other scope's or
// unmatched evidence (no scope's); a token of the whole tenant pages
// through every scope's items and the evidence, as before scopes.
func TestListsAndTheirPagesShowEachScopeItsOwnItemsOnly(t *testing.T) {
	t.Parallel()
	s := setupScopes(t, testpipeline.Options{})
	p := s.p
	ids := map[string][]string{} // by list and scope
	add := func(list, scope string, op ledger.Operation) {
		ids[list+"/"+scope] = append(ids[list+"/"+scope], op.ID.String())
	}
	for scope, agent := range map[string]string{"supply-eu": s.eu[auth.RoleAgent], "supply-us": s.us[auth.RoleAgent], "": p.Agent} {
		for i := range 2 {
			add("operations", scope, s.enqueue(t, agent, fmt.Sprintf("po-%s-%d", scope, i), `{"sku":"A-1","qty":1}`))
			proposal := s.propose(t, agent, fmt.Sprintf("proposal-%s-%d", scope, i))
			add("operations", scope, proposal)
			add("approval-requests", scope, proposal)
			review := s.inReview(t, agent, fmt.Sprintf("review-%s-%d", scope, i))
			add("operations", scope, review)
			add("review", scope, review)
			claimed := s.move(t, s.enqueue(t, agent, fmt.Sprintf("claimed-%s-%d", scope, i), `{"sku":"C-1"}`), ledger.Change{
				To: ledger.StatusDispatching, LeaseOwner: "worker:test", LeaseUntil: time.Now().Add(time.Minute)})
			add("operations", scope, claimed)
			add("dispatch", scope, claimed)
		}
	}
	evidence := s.unmatched(t, "ref-nobody")

	lists := []struct {
		name, path, items, id string
		role                  auth.Role
	}{
		{"operations", "/v1/operations", "operations", "id", auth.RoleAgent},
		{"approval-requests", "/v1/approval-requests", "items", "operation_id", auth.RoleApprover},
		{"review", "/v1/review", "items", "operation_id", auth.RoleOperator},
		{"dispatch", "/v1/dispatch", "in_flight", "operation_id", auth.RoleOperator},
	}
	for _, l := range lists {
		t.Run(l.name, func(t *testing.T) {
			for _, who := range []struct {
				name  string
				token string
				want  []string
			}{
				{"supply-eu", s.eu[l.role], ids[l.name+"/supply-eu"]},
				{"supply-us", s.us[l.role], ids[l.name+"/supply-us"]},
				{"the whole tenant", map[auth.Role]string{auth.RoleAgent: p.Agent, auth.RoleApprover: p.Approver, auth.RoleOperator: p.Operator}[l.role],
					slices.Concat(ids[l.name+"/supply-eu"], ids[l.name+"/supply-us"], ids[l.name+"/"])},
			} {
				got := pageThrough(t, p, l.path, who.token, l.items, l.id)
				want := slices.Clone(who.want)
				if l.name == "review" && who.name == "the whole tenant" {
					want = append(want, fmt.Sprintf("evidence/%d", evidence))
				}
				slices.Sort(got)
				slices.Sort(want)
				if !slices.Equal(got, want) {
					t.Errorf("%s pages through %v, want %v", who.name, got, want)
				}
			}
		})
	}
}

// pageThrough follows path's next_cursor one item at a time, and returns
// the id field of every item under items (an unmatched evidence item as
// "evidence/<id>").
func pageThrough(t *testing.T, p *testpipeline.Pipeline, path, token, items, id string) []string {
	t.Helper()
	var got []string
	cursor := ""
	for range 100 {
		u := path + "?limit=1"
		if cursor != "" {
			u += "&cursor=" + url.QueryEscape(cursor)
		}
		status, out := p.Do("GET", u, token, "")
		if status != http.StatusOK {
			t.Fatalf("GET %s: %d %v", u, status, out)
		}
		list, _ := out[items].([]any)
		for _, x := range list {
			item, _ := x.(map[string]any)
			if item[id] == nil && item["evidence_id"] != nil {
				got = append(got, fmt.Sprintf("evidence/%v", item["evidence_id"]))
				continue
			}
			got = append(got, fmt.Sprint(item[id]))
		}
		cursor, _ = out["next_cursor"].(string)
		if cursor == "" {
			return got
		}
	}
	t.Fatalf("%s: next_cursor never ends", path)
	return nil
}

// TestAKeyInUseByAnotherScopeIs409KeyInUseElsewhereNamingNothingOfIt:
// keys are unique per tenant. supply-us asking for a key supply-eu's
// operation holds (the same params, other params, or as a proposal) is
// 409 key_in_use_elsewhere, whose body names nothing of that operation (no
// operation, no id, status or summary), and nothing is stored or sent.
// supply-eu itself keeps today's answers (a replay, a conflict naming its
// operation), and so does a token of the whole tenant.
func TestAKeyInUseByAnotherScopeIs409KeyInUseElsewhereNamingNothingOfIt(t *testing.T) {
	t.Parallel()
	s := setupScopes(t, testpipeline.Options{})
	p := s.p
	p.Start(1)
	const params = `{"sku":"A-1","qty":3}`
	held := s.enqueue(t, s.eu[auth.RoleAgent], "po-37", params)
	held = p.WaitStatus(held, ledger.StatusSucceeded, 10*time.Second)
	before := len(p.Kinds(held))

	withApproval := func(params string) string {
		a := p.Approve(params, time.Hour)
		return fmt.Sprintf(`{"action":%q,"key":"po-37","params":%s,"approval_id":%q}`, testpipeline.Action, params, a.ID)
	}
	for _, tt := range []struct{ name, body string }{
		{"the same params", withApproval(params)},
		{"other params", withApproval(`{"sku":"A-1","qty":4}`)},
		{"a proposal", proposalBody("po-37", params)},
		{"a proposal with other params", proposalBody("po-37", `{"sku":"B-2","qty":1}`)},
	} {
		t.Run(tt.name, func(t *testing.T) {
			status, out := p.Do("POST", "/v1/operations", s.us[auth.RoleAgent], tt.body)
			e, _ := out["error"].(map[string]any)
			raw, _ := json.Marshal(out)
			if status != http.StatusConflict || errCode(out) != "key_in_use_elsewhere" || e["operation"] != nil {
				t.Fatalf("supply-us asks for supply-eu's key: %d %s, want 409 key_in_use_elsewhere with no operation", status, raw)
			}
			for _, secret := range []string{held.ID.String(), string(held.Status), held.Summary(), held.ExternalKey, "supply-eu"} {
				if strings.Contains(string(raw), secret) {
					t.Errorf("the answer %s names %q of the other scope's operation", raw, secret)
				}
			}
		})
	}
	if got := len(p.Kinds(held)); got != before {
		t.Errorf("supply-eu's operation has %d events after supply-us's requests, want %d: its history hears nothing", got, before)
	}
	var n int
	if err := p.Pool.QueryRow(context.Background(), `SELECT count(*) FROM operations`).Scan(&n); err != nil || n != 1 {
		t.Errorf("%d operations (%v), want only supply-eu's", n, err)
	}
	p.Settled(10 * time.Second)
	if got := p.Orders(held); got != 1 {
		t.Errorf("%d orders at the supplier, want 1", got)
	}

	// supply-eu's own requests, and the whole tenant's, are answered as
	// before scopes.
	for _, who := range []struct{ name, token string }{{"supply-eu", s.eu[auth.RoleAgent]}, {"the whole tenant", p.Agent}} {
		status, out := p.Do("POST", "/v1/operations", who.token, proposalBody("po-37", params))
		if status != http.StatusOK || out["id"] != held.ID.String() {
			t.Errorf("%s replays the key: %d %v, want 200 with %s", who.name, status, out, held.ID)
		}
		status, out = p.Do("POST", "/v1/operations", who.token, proposalBody("po-37", `{"sku":"A-1","qty":9}`))
		e, _ := out["error"].(map[string]any)
		ref, _ := e["operation"].(map[string]any)
		if status != http.StatusConflict || errCode(out) != "key_reused_with_different_params" || ref["id"] != held.ID.String() {
			t.Errorf("%s with other params: %d %v, want 409 key_reused_with_different_params naming %s", who.name, status, out, held.ID)
		}
	}
}

// TestBusinessKeysAreUniquePerTenantAcrossScopes: with an action's business
// key, a second department proposing the same purchase order under a key
// of its own gets 409 key_in_use_elsewhere naming nothing (also when its
// params break the action's schema: a taken key answers first, whoever
// holds it), and the supplier still gets one order; the first
// department's re-planned proposal is its operation again (200).
func TestBusinessKeysAreUniquePerTenantAcrossScopes(t *testing.T) {
	t.Parallel()
	s := setupScopes(t, testpipeline.Options{ActionContract: `key: '"po-" + string(params.purchase_order)', ` +
		`params_schema: {type: object, required: [purchase_order, sku, qty]}, ` +
		`approval: {auto_approve: "params.qty <= 10", policy_version: p1}`})
	p := s.p
	p.Start(1)
	propose := func(token, clientKey, params string) (int, map[string]any) {
		return p.Do("POST", "/v1/operations", token, fmt.Sprintf(`{"action":%q,"key":%q,"params":%s,"request_approval":true}`, testpipeline.Action, clientKey, params))
	}
	status, out := propose(s.eu[auth.RoleAgent], "plan-a-1", `{"purchase_order":37,"sku":"A-1","qty":4}`)
	if status != http.StatusCreated || out["key"] != "po-37" || out["scope"] != "supply-eu" {
		t.Fatalf("supply-eu proposes PO 37: %d %v, want 201 queued by policy, key po-37, scope supply-eu", status, out)
	}
	first := p.WaitStatus(p.Operation(out), ledger.StatusSucceeded, 10*time.Second)

	for _, params := range []string{`{"purchase_order":37,"sku":"A-1","qty":4}`, `{"purchase_order":37,"qty":4}`} {
		status, out = propose(s.us[auth.RoleAgent], "us-plan-1", params)
		if raw, _ := json.Marshal(out); status != http.StatusConflict || errCode(out) != "key_in_use_elsewhere" || strings.Contains(string(raw), first.ID.String()) {
			t.Errorf("supply-us proposes PO 37 with %s: %d %s, want 409 key_in_use_elsewhere naming nothing", params, status, raw)
		}
	}
	if status, out = propose(s.eu[auth.RoleAgent], "plan-b-7", `{"purchase_order":37,"sku":"A-1","qty":4}`); status != http.StatusOK || out["id"] != first.ID.String() {
		t.Errorf("supply-eu re-plans PO 37: %d %v, want 200 with %s", status, out, first.ID)
	}
	p.Settled(10 * time.Second)
	if got := p.Orders(first); got != 1 {
		t.Errorf("%d orders for PO 37, want 1", got)
	}
	if got := p.Supplier.TotalOrders(); got != 1 {
		t.Errorf("%d orders at the supplier, want 1", got)
	}
}

// TestAScopedOperatorMayNotPressTheStopButton: a pause holds every
// scope's work, so an operator of one scope is refused (403 forbidden)
// on pause and resume and nothing changes; the tenant's pauses, made by
// an operator of the whole tenant, are shown to it, since they hold its
// work too.
func TestAScopedOperatorMayNotPressTheStopButton(t *testing.T) {
	t.Parallel()
	s := setupScopes(t, testpipeline.Options{})
	p := s.p
	for _, path := range []string{"/v1/dispatch/pause", "/v1/dispatch/resume"} {
		if status, out := p.Do("POST", path, s.eu[auth.RoleOperator], `{"provider":"acme"}`); status != http.StatusForbidden || errCode(out) != "forbidden" {
			t.Errorf("POST %s by supply-eu: %d %v, want 403 forbidden", path, status, out)
		}
	}
	if status, out := p.Do("GET", "/v1/dispatch", s.eu[auth.RoleOperator], ""); status != http.StatusOK || len(out["paused"].([]any)) != 0 {
		t.Fatalf("dispatch after supply-eu's pause: %d %v, want nothing paused", status, out)
	}
	if status, out := p.Do("POST", "/v1/dispatch/pause", p.Operator, `{"provider":"acme"}`); status != http.StatusOK {
		t.Fatalf("pause by the whole tenant: %d %v", status, out)
	}
	if status, out := p.Do("GET", "/v1/dispatch", s.eu[auth.RoleOperator], ""); status != http.StatusOK || len(out["paused"].([]any)) != 1 {
		t.Errorf("dispatch seen by supply-eu: %d %v, want the tenant's pause", status, out)
	}
}

// TestReplayOfAScopeTellsOfItsScopesItemsOnly: POST /v1/review/replay by
// an operator of a scope re-reads the tenant's review stream and reports
// its own scope's items only; the whole tenant's replay reports every
// scope's.
func TestReplayOfAScopeTellsOfItsScopesItemsOnly(t *testing.T) {
	t.Parallel()
	s := setupScopes(t, testpipeline.Options{})
	p := s.p
	p.Start(0) // the relay publishes the review announcements
	eu := s.inReview(t, s.eu[auth.RoleAgent], "review-eu")
	us := s.inReview(t, s.us[auth.RoleAgent], "review-us")
	p.Eventually(10*time.Second, "the review announcements to be published", func() bool {
		var n int
		_ = p.Pool.QueryRow(context.Background(), `SELECT count(*) FROM outbox WHERE published_at IS NULL AND msg_id LIKE 'review.%'`).Scan(&n)
		return n == 0
	})
	replayed := func(token string) []string {
		t.Helper()
		status, body := doWithHeaders(t, p, "POST", "/v1/review/replay", token, `{"dry_run":true}`, nil)
		if status != http.StatusOK {
			t.Fatalf("replay: %d %s", status, body)
		}
		var keys []string
		for _, key := range []string{eu.Key, us.Key} {
			if strings.Contains(body, `"key":"`+key+`"`) {
				keys = append(keys, key)
			}
		}
		return keys
	}
	for _, tt := range []struct {
		name, token string
		want        []string
	}{
		{"supply-eu", s.eu[auth.RoleOperator], []string{eu.Key}},
		{"supply-us", s.us[auth.RoleOperator], []string{us.Key}},
		{"the whole tenant", p.Operator, []string{eu.Key, us.Key}},
	} {
		if got := replayed(tt.token); !slices.Equal(got, tt.want) {
			t.Errorf("%s's replay tells of %v, want %v", tt.name, got, tt.want)
		}
	}
}

// An approver of the whole tenant sees which scope each proposal came
// from; a proposal of a token without a scope names none.
func TestApprovalRequestsNameTheScopeTheyCameFrom(t *testing.T) {
	t.Parallel()
	s := setupScopes(t, testpipeline.Options{})
	s.propose(t, s.eu[auth.RoleAgent], "po-eu")
	s.propose(t, s.p.Agent, "po-all")
	_, out := s.p.Do("GET", "/v1/approval-requests", s.p.Approver, "")
	scopes := map[string]any{}
	for _, item := range out["items"].([]any) {
		it := item.(map[string]any)
		scopes[it["key"].(string)] = it["scope"]
	}
	if scopes["po-eu"] != "supply-eu" || scopes["po-all"] != nil {
		t.Errorf("scopes of the approval requests = %v, want po-eu's supply-eu and none for po-all", scopes)
	}
}

// An operator of the whole tenant sees which scope a review item is of.
func TestReviewItemsNameTheirScope(t *testing.T) {
	t.Parallel()
	s := setupScopes(t, testpipeline.Options{})
	op := s.enqueue(t, s.eu[auth.RoleAgent], "po-eu", `{"sku":"A-1","qty":3}`)
	if _, err := s.p.Store.Transition(context.Background(), ledger.Change{
		ID: op.ID, From: op.Status, Version: op.Version, To: ledger.StatusReview, Kind: "test_review", Actor: "test",
		Review: &ledger.Review{Reason: ledger.ReasonOutcomeUnknown, Owner: "supply-ops", Deadline: time.Now().Add(time.Hour)},
	}); err != nil {
		t.Fatal(err)
	}
	_, out := s.p.Do("GET", "/v1/review", s.p.Operator, "")
	items, _ := out["items"].([]any)
	if len(items) != 1 || items[0].(map[string]any)["scope"] != "supply-eu" {
		t.Errorf("review items = %v, want po-eu's, of scope supply-eu", items)
	}
}
