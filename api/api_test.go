package api_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/actledger/actledger/api"
	"github.com/actledger/actledger/api/openapitest"
	"github.com/actledger/actledger/app"
	"github.com/actledger/actledger/auth"
	"github.com/actledger/actledger/internal/testdb"
	"github.com/actledger/actledger/internal/testfactory"
	"github.com/actledger/actledger/internal/testnats"
	"github.com/actledger/actledger/ledger"
	"github.com/actledger/actledger/provider"
)

const action = "supplier.create_order"

// providersYAML is the providers config of every fixture: acme executes
// action and cancelAction (the compensations of the review tests), beta
// executes ticketAction (the dispatch scopes of two providers). No action
// names a params schema or a policy: any params object is accepted and
// every proposal waits for a person, with the default TTLs.
var providersYAML = fmt.Sprintf(`
providers:
  acme: {base_url: "http://127.0.0.1:9", account: acct_test, environment: test, create: {path: /v1/orders}}
  beta: {base_url: "http://127.0.0.1:9", account: acct_beta, environment: test, create: {path: /v1/tickets}}
actions:
  %s: {provider: acme}
  %s: {provider: acme}
  %s: {provider: beta}
`, action, cancelAction, ticketAction)

// clock is a test clock the ledger and API share.
type clock struct{ offset atomic.Int64 }

func (c *clock) Now() time.Time          { return time.Now().Add(time.Duration(c.offset.Load())) }
func (c *clock) Advance(d time.Duration) { c.offset.Add(int64(d)) }

// fixture is the API as a process serves it: built by app.Build with the
// API role, so its store, tokens, reconciler and subjects are wired as in
// `actledger serve`, on a database and streams of its own. Nothing is
// started: the API needs no background work, and a test counting the
// queries of a request sees only the request's.
type fixture struct {
	app      *app.App
	pool     *pgxpool.Pool
	store    *ledger.Store
	tokens   *auth.Tokens
	srv      *httptest.Server
	clock    *clock
	agent    string
	approver string
	operator string
}

// option changes the API's part of the config the fixture builds its
// process from (app.Config.API); what app.Build wires itself (the store,
// the tokens, the subjects, the registry) it sets over the option's.
type option func(*api.Config)

// withDefaultRequestTimeout serves with the production bound on a
// request's work instead of the fixture's 3 s (which keeps the outage
// tests short): for tests of many concurrent callers, whose requests
// queue on one row under the race detector, and which a loaded machine
// stretches past 3 s into 503s that prove nothing about what they test.
func withDefaultRequestTimeout() option {
	return func(c *api.Config) { c.RequestTimeout = api.DefaultRequestTimeout }
}

func setup(t *testing.T, opts ...option) *fixture {
	t.Helper()
	return setupWithPool(t, testdb.New(t), opts...)
}

func setupWithPool(t *testing.T, pool *pgxpool.Pool, opts ...option) *fixture {
	t.Helper()
	return setupWithProviders(t, pool, providersYAML, opts...)
}

// setupWithProviders is setupWithPool with another providers config.
func setupWithProviders(t *testing.T, pool *pgxpool.Pool, providers string, opts ...option) *fixture {
	t.Helper()
	reg, err := provider.Parse([]byte(providers))
	if err != nil {
		t.Fatal(err)
	}
	f := &fixture{pool: pool, clock: &clock{}}
	cfg := app.Config{
		Pool: pool, Broker: testnats.New(t), Registry: reg, Roles: app.Roles{API: true}, Now: f.clock.Now,
		API: api.Config{RequestTimeout: 3 * time.Second},
		// Every route is served, /metrics included (nothing folds: the
		// fixture starts nothing).
		Metrics: true,
		Logger:  slog.New(slog.DiscardHandler),
	}
	for _, o := range opts {
		o(&cfg.API)
	}
	a, err := app.Build(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(a.Close)
	f.app, f.store, f.tokens = a, a.Store, a.Tokens
	// Every request and answer of the API tests is checked against the
	// OpenAPI document; the web console beside the API is not in it.
	f.srv = httptest.NewServer(openapitest.Handler(t, a.Handler, "/console/"))
	t.Cleanup(f.srv.Close)
	tenant := testfactory.NewTenant(t, f.tokens, "acme-corp")
	f.agent, f.approver, f.operator = tenant.Agent.Secret, tenant.Approver.Secret, tenant.Operator.Secret
	return f
}

func (f *fixture) token(t *testing.T, tenant string, role auth.Role) string {
	t.Helper()
	c, err := f.tokens.Create(context.Background(), tenant, role, "")
	if err != nil {
		t.Fatal(err)
	}
	return c.Secret
}

type response struct {
	status int
	header http.Header
	body   map[string]any
	raw    string
}

func (r response) errorCode() string {
	e, _ := r.body["error"].(map[string]any)
	code, _ := e["code"].(string)
	return code
}

func (r response) str(key string) string {
	s, _ := r.body[key].(string)
	return s
}

func (f *fixture) do(t *testing.T, method, path, token string, body []byte) response {
	t.Helper()
	req, err := http.NewRequest(method, f.srv.URL+path, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	return send(t, req)
}

// send performs req and decodes a JSON answer.
func send(t *testing.T, req *http.Request) response {
	t.Helper()
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	raw, _ := io.ReadAll(res.Body)
	r := response{status: res.StatusCode, header: res.Header, raw: string(raw)}
	_ = json.Unmarshal(raw, &r.body)
	return r
}

func (f *fixture) approve(t *testing.T, params string, extra string) string {
	t.Helper()
	body := fmt.Sprintf(`{"action":%q,"params":%s,"ttl_seconds":3600,"policy_version":"p1"%s}`, action, params, extra)
	r := f.do(t, "POST", "/v1/approvals", f.approver, []byte(body))
	if r.status != http.StatusCreated {
		t.Fatalf("approve: %d %s", r.status, r.raw)
	}
	return r.str("id")
}

func opBody(key, params, approval string) []byte {
	if key == "" {
		return []byte(fmt.Sprintf(`{"action":%q,"params":%s,"approval_id":%q}`, action, params, approval))
	}
	return []byte(fmt.Sprintf(`{"action":%q,"key":%q,"params":%s,"approval_id":%q}`, action, key, params, approval))
}

func (f *fixture) count(t *testing.T, table string) int {
	t.Helper()
	var n int
	if err := f.pool.QueryRow(context.Background(), "SELECT count(*) FROM "+table).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

func TestBadInputIsRefusedAndWritesNothing(t *testing.T) {
	t.Parallel()
	f := setup(t)
	approval := f.approve(t, `{"sku":"A-1"}`, "")
	huge := []byte(`{"action":"supplier.create_order","params":{"x":"` + strings.Repeat("a", api.DefaultMaxBody) + `"}}`)
	tests := []struct {
		name      string
		token     string
		body      []byte
		status    int
		code      string
		mentioned string // the message names this field
	}{
		{"malformed JSON", f.agent, []byte(`{"action":`), 400, "malformed_json", ""},
		{"not an object", f.agent, []byte(`[1,2]`), 400, "malformed_json", ""},
		{"trailing data", f.agent, append(opBody("k1", `{"sku":"A-1"}`, approval), []byte(`{}`)...), 400, "malformed_json", ""},
		{"empty body", f.agent, nil, 400, "malformed_json", ""},
		{"unknown field", f.agent, []byte(`{"action":"supplier.create_order","params":{},"approval_id":"` + approval + `","priority":1}`), 400, "unknown_field", "priority"},
		{"wrong type", f.agent, []byte(`{"action":"supplier.create_order","key":7,"params":{},"approval_id":"` + approval + `"}`), 400, "invalid_field", "key"},
		{"params not an object", f.agent, []byte(`{"action":"supplier.create_order","params":[1],"approval_id":"` + approval + `"}`), 400, "invalid_field", "params"},
		{"approval id not a uuid", f.agent, []byte(`{"action":"supplier.create_order","params":{},"approval_id":"nope"}`), 403, "approval_mismatch", ""},
		{"no approval id", f.agent, []byte(`{"action":"supplier.create_order","key":"k9","params":{}}`), 403, "approval_mismatch", ""},
		{"number out of range", f.agent, []byte(`{"action":"supplier.create_order","params":{"n":1e999},"approval_id":"` + approval + `"}`), 400, "invalid_field", "params"},
		{"missing action", f.agent, []byte(`{"params":{},"approval_id":"` + approval + `"}`), 400, "invalid_field", "action"},
		{"empty key", f.agent, []byte(`{"action":"supplier.create_order","key":"","params":{},"approval_id":"` + approval + `"}`), 400, "invalid_field", "key"},
		{"body over 1 MiB", f.agent, huge, 413, "body_too_large", ""},
		{"no token", "", opBody("k1", `{"sku":"A-1"}`, approval), 401, "unauthenticated", ""},
		{"bad token", "alt_forged", opBody("k1", `{"sku":"A-1"}`, approval), 401, "unauthenticated", ""},
		{"wrong role", f.approver, opBody("k1", `{"sku":"A-1"}`, approval), 403, "forbidden", ""},
		{"unknown action", f.agent, []byte(`{"action":"rocket.launch","params":{},"approval_id":"` + approval + `"}`), 422, "unknown_action", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := f.do(t, "POST", "/v1/operations", tt.token, tt.body)
			if r.status != tt.status || r.errorCode() != tt.code {
				t.Errorf("got %d %s, want %d %s (%s)", r.status, r.errorCode(), tt.status, tt.code, r.raw)
			}
			if msg, _ := r.body["error"].(map[string]any)["message"].(string); !strings.Contains(msg, tt.mentioned) {
				t.Errorf("message %q does not name %q", msg, tt.mentioned)
			}
		})
	}
	if n := f.count(t, "operations"); n != 0 {
		t.Errorf("operations = %d, want 0", n)
	}
	if n := f.count(t, "outbox"); n != 0 {
		t.Errorf("outbox rows = %d, want 0", n)
	}
}

// TestChecksRunInContractOrder: token (401), role (403), size (413), JSON
// (400), action (422), the other fields (400), existing key (200/409),
// approval (403).
func TestChecksRunInContractOrder(t *testing.T) {
	t.Parallel()
	f := setup(t)
	approval := f.approve(t, `{"sku":"A-1"}`, "")
	huge := bytes.Repeat([]byte("x"), api.DefaultMaxBody+1)
	if r := f.do(t, "POST", "/v1/operations", f.agent, opBody("po-1", `{"sku":"A-1"}`, approval)); r.status != 201 {
		t.Fatalf("create: %d %s", r.status, r.raw)
	}
	// Revoke the approval: a replay must still answer 200, because the key
	// check comes before the approval check.
	if r := f.do(t, "POST", "/v1/approvals/"+approval+"/revoke", f.approver, nil); r.status != 200 {
		t.Fatalf("revoke: %d %s", r.status, r.raw)
	}
	tests := []struct {
		name   string
		token  string
		body   []byte
		status int
		code   string
	}{
		{"no token beats wrong role and bad JSON", "", []byte("{"), 401, "unauthenticated"},
		{"wrong role beats size", f.approver, huge, 403, "forbidden"},
		{"size beats JSON", f.agent, huge, 413, "body_too_large"},
		{"JSON beats unknown action", f.agent, []byte(`{"action":"rocket.launch",`), 400, "malformed_json"},
		{"unknown action beats approval", f.agent, []byte(`{"action":"rocket.launch","params":{},"approval_id":"` + approval + `"}`), 422, "unknown_action"},
		{"unknown action beats missing params", f.agent, []byte(`{"action":"nope"}`), 422, "unknown_action"},
		{"unknown action beats a bad key and params", f.agent, []byte(`{"action":"nope","key":"","params":[1]}`), 422, "unknown_action"},
		{"missing action is a field error", f.agent, []byte(`{"key":"","params":[1]}`), 400, "invalid_field"},
		{"replay beats revoked approval", f.agent, opBody("po-1", `{"sku":"A-1"}`, approval), 200, ""},
		{"replay beats a missing approval", f.agent, opBody("po-1", `{"sku":"A-1"}`, "not-an-approval"), 200, ""},
		{"conflict beats revoked approval", f.agent, opBody("po-1", `{"sku":"A-2"}`, approval), 409, "key_reused_with_different_params"},
		{"revoked approval for a new key", f.agent, opBody("po-2", `{"sku":"A-1"}`, approval), 403, "approval_revoked"},
	}
	for _, tt := range tests {
		r := f.do(t, "POST", "/v1/operations", tt.token, tt.body)
		if r.status != tt.status || r.errorCode() != tt.code {
			t.Errorf("%s: got %d %q, want %d %q (%s)", tt.name, r.status, r.errorCode(), tt.status, tt.code, r.raw)
		}
	}
}

func TestIdempotentEnqueueOverHTTP(t *testing.T) {
	t.Parallel()
	f := setup(t)
	approval := f.approve(t, `{"sku":"A-1","qty":3}`, "")
	first := f.do(t, "POST", "/v1/operations", f.agent, opBody("po-37", `{"sku":"A-1","qty":3}`, approval))
	if first.status != 201 || first.header.Get("Idempotent-Replayed") != "" {
		t.Fatalf("first: %d %v", first.status, first.header)
	}
	again := f.do(t, "POST", "/v1/operations", f.agent, opBody("po-37", "{ \"qty\": 3,\n \"sku\": \"A-1\" }", approval))
	if again.status != 200 || again.header.Get("Idempotent-Replayed") != "true" || again.str("id") != first.str("id") {
		t.Errorf("replay: %d %v %s", again.status, again.header, again.raw)
	}
	changed := f.do(t, "POST", "/v1/operations", f.agent, opBody("po-37", `{"sku":"A-1","qty":4}`, approval))
	if changed.status != 409 || changed.errorCode() != "key_reused_with_different_params" {
		t.Errorf("changed params: %d %s", changed.status, changed.raw)
	}
	events := f.do(t, "GET", "/v1/operations/"+first.str("id")+"/events", f.agent, nil)
	list, _ := events.body["events"].([]any)
	kinds := []string{}
	for _, e := range list {
		kinds = append(kinds, e.(map[string]any)["kind"].(string))
	}
	if strings.Join(kinds, ",") != "created,key_conflict" {
		t.Errorf("event kinds = %v, want created,key_conflict", kinds)
	}
	if n := f.count(t, "outbox"); n != 1 {
		t.Errorf("outbox rows = %d, want 1", n)
	}
}

func TestFiftyConcurrentIdenticalRequestsGetOneOperation(t *testing.T) {
	t.Parallel()
	f := setup(t, withDefaultRequestTimeout())
	approval := f.approve(t, `{"sku":"A-1"}`, "")
	const callers = 50
	ids := make([]string, callers)
	statuses := make([]int, callers)
	var wg sync.WaitGroup
	for i := range callers {
		wg.Go(func() {
			r := f.do(t, "POST", "/v1/operations", f.agent, opBody("po-1", `{"sku":"A-1"}`, approval))
			ids[i], statuses[i] = r.str("id"), r.status
		})
	}
	wg.Wait()
	created := 0
	for i := range callers {
		if statuses[i] == 201 {
			created++
		} else if statuses[i] != 200 {
			t.Errorf("caller %d: status %d", i, statuses[i])
		}
		if ids[i] != ids[0] || ids[i] == "" {
			t.Errorf("caller %d got id %q, caller 0 got %q", i, ids[i], ids[0])
		}
	}
	if created != 1 {
		t.Errorf("%d callers got 201, want exactly 1", created)
	}
	if n, m := f.count(t, "operations"), f.count(t, "outbox"); n != 1 || m != 1 {
		t.Errorf("operations %d, outbox rows %d; want 1 and 1", n, m)
	}
}

func TestConcurrentRequestsAgainstMaxUsesOneApprovalMakeOneOperation(t *testing.T) {
	t.Parallel()
	f := setup(t, withDefaultRequestTimeout())
	approval := f.approve(t, `{"sku":"A-1"}`, `,"max_uses":1`)
	const callers = 20
	statuses := make([]response, callers)
	var wg sync.WaitGroup
	for i := range callers {
		wg.Go(func() {
			statuses[i] = f.do(t, "POST", "/v1/operations", f.agent, opBody(fmt.Sprintf("po-%d", i), `{"sku":"A-1"}`, approval))
		})
	}
	wg.Wait()
	created := 0
	for _, r := range statuses {
		switch {
		case r.status == 201:
			created++
		case r.status == 403 && r.errorCode() == "approval_used":
		default:
			t.Errorf("unexpected answer %d %s", r.status, r.raw)
		}
	}
	if created != 1 || f.count(t, "operations") != 1 {
		t.Errorf("created %d, operations %d; want 1 and 1", created, f.count(t, "operations"))
	}
}

func TestApprovalProblemsAnswer403WithTheirCode(t *testing.T) {
	t.Parallel()
	f := setup(t)
	expiring := f.approve(t, `{"sku":"A-1"}`, "")
	revoked := f.approve(t, `{"sku":"A-1"}`, "")
	f.do(t, "POST", "/v1/approvals/"+revoked+"/revoke", f.approver, nil)
	mismatched := f.approve(t, `{"sku":"A-1"}`, "")
	used := f.approve(t, `{"sku":"A-1"}`, "")
	if r := f.do(t, "POST", "/v1/operations", f.agent, opBody("use-it", `{"sku":"A-1"}`, used)); r.status != 201 {
		t.Fatal(r.raw)
	}
	otherTenant := setupWithPool(t, f.pool)
	foreign := otherTenant.approveAs(t, otherTenant.token(t, "globex", auth.RoleApprover), `{"sku":"A-1"}`)

	f.clock.Advance(2 * time.Hour) // every approval above expires now...
	fresh := f.approve(t, `{"sku":"A-1"}`, "")
	_ = expiring

	tests := []struct {
		name, approval, params, code string
	}{
		{"expired", expiring, `{"sku":"A-1"}`, "approval_expired"},
		{"revoked", revoked, `{"sku":"A-1"}`, "approval_revoked"},
		{"params not approved", fresh, `{"sku":"A-9"}`, "approval_mismatch"},
		{"other tenant's approval", foreign, `{"sku":"A-1"}`, "approval_mismatch"},
		{"missing approval", "0193a7a0-0000-7000-8000-000000000000", `{"sku":"A-1"}`, "approval_mismatch"},
		{"expired beats used", used, `{"sku":"A-1"}`, "approval_expired"},
		{"mismatch on expired", mismatched, `{"sku":"A-1"}`, "approval_expired"},
	}
	for _, tt := range tests {
		r := f.do(t, "POST", "/v1/operations", f.agent, opBody("po-"+strings.ReplaceAll(tt.name, " ", "-"), tt.params, tt.approval))
		if r.status != 403 || r.errorCode() != tt.code {
			t.Errorf("%s: got %d %s, want 403 %s", tt.name, r.status, r.raw, tt.code)
		}
	}
	usedNow := f.approve(t, `{"sku":"A-1"}`, "")
	f.do(t, "POST", "/v1/operations", f.agent, opBody("first", `{"sku":"A-1"}`, usedNow))
	if r := f.do(t, "POST", "/v1/operations", f.agent, opBody("second", `{"sku":"A-1"}`, usedNow)); r.status != 403 || r.errorCode() != "approval_used" {
		t.Errorf("used: got %d %s", r.status, r.raw)
	}
}

func (f *fixture) approveAs(t *testing.T, token, params string) string {
	t.Helper()
	body := fmt.Sprintf(`{"action":%q,"params":%s,"ttl_seconds":3600,"policy_version":"p1"}`, action, params)
	r := f.do(t, "POST", "/v1/approvals", token, []byte(body))
	if r.status != 201 {
		t.Fatalf("approve: %d %s", r.status, r.raw)
	}
	return r.str("id")
}

func TestAnotherTenantsObjectsAnswer404LikeMissingOnes(t *testing.T) {
	t.Parallel()
	f := setup(t)
	approval := f.approve(t, `{"sku":"A-1"}`, "")
	op := f.do(t, "POST", "/v1/operations", f.agent, opBody("po-1", `{"sku":"A-1"}`, approval))
	intruderAgent := f.token(t, "globex", auth.RoleAgent)
	intruderApprover := f.token(t, "globex", auth.RoleApprover)
	id := op.str("id")
	for _, path := range []string{
		"/v1/operations/" + id,
		"/v1/operations/" + id + "/events",
		"/v1/operations?action=" + action + "&key=po-1",
	} {
		foreign := f.do(t, "GET", path, intruderAgent, nil)
		missing := f.do(t, "GET", strings.Replace(path, id, "0193a7a0-0000-7000-8000-000000000000", 1), intruderAgent, nil)
		if foreign.status != 404 || foreign.raw != missing.raw && !strings.Contains(path, "key=") {
			t.Errorf("GET %s as another tenant: %d %s; missing: %d %s", path, foreign.status, foreign.raw, missing.status, missing.raw)
		}
	}
	if r := f.do(t, "POST", "/v1/approvals/"+approval+"/revoke", intruderApprover, nil); r.status != 404 {
		t.Errorf("revoke another tenant's approval: %d", r.status)
	}
	if r := f.do(t, "GET", "/v1/operations/"+id, f.agent, nil); r.status != 200 || r.str("status") != "queued" {
		t.Errorf("own tenant: %d %s", r.status, r.raw)
	}
}

func TestOperationViewHasEveryContractField(t *testing.T) {
	t.Parallel()
	f := setup(t)
	approval := f.approve(t, `{"sku":"A-1"}`, "")
	r := f.do(t, "POST", "/v1/operations", f.agent, opBody("", `{"sku":"A-1"}`, approval))
	for _, field := range []string{"id", "tenant", "action", "key", "status", "params", "params_fingerprint",
		"approval_id", "external_key", "provider", "provider_reference", "attempts", "created_at", "updated_at", "summary"} {
		if _, ok := r.body[field]; !ok {
			t.Errorf("field %s missing from %s", field, r.raw)
		}
	}
	if r.str("key") != approval {
		t.Errorf("key = %q, want the approval id when omitted", r.str("key"))
	}
	if !strings.HasPrefix(r.str("params_fingerprint"), "jcs-sha256:") {
		t.Errorf("params_fingerprint = %q", r.str("params_fingerprint"))
	}
	for _, ts := range []string{"created_at", "updated_at"} {
		parsed, err := time.Parse(time.RFC3339, r.str(ts))
		if err != nil || !strings.HasSuffix(r.str(ts), "Z") || parsed.IsZero() {
			t.Errorf("%s = %q, want RFC 3339 UTC", ts, r.str(ts))
		}
	}
	byKey := f.do(t, "GET", "/v1/operations?action="+action+"&key="+approval, f.operator, nil)
	if byKey.status != 200 || byKey.str("id") != r.str("id") {
		t.Errorf("by key: %d %s", byKey.status, byKey.raw)
	}
}

func TestRevokedTokenAuthenticatesNothingAndHoldsItsWork(t *testing.T) {
	t.Parallel()
	f := setup(t)
	approval := f.approve(t, `{"sku":"A-1"}`, "")
	agent, err := f.tokens.Create(context.Background(), "acme-corp", auth.RoleAgent, "agent-to-revoke")
	if err != nil {
		t.Fatal(err)
	}
	op := f.do(t, "POST", "/v1/operations", agent.Secret, opBody("po-1", `{"sku":"A-1"}`, approval))
	if _, err := f.tokens.Revoke(context.Background(), "agent-to-revoke", "test"); err != nil {
		t.Fatal(err)
	}
	if r := f.do(t, "GET", "/v1/operations/"+op.str("id"), agent.Secret, nil); r.status != 401 {
		t.Errorf("revoked token: %d", r.status)
	}
	r := f.do(t, "GET", "/v1/operations/"+op.str("id"), f.operator, nil)
	if r.str("status") != "held" || !strings.Contains(r.str("summary"), "not sent") {
		t.Errorf("after revoke: %s", r.raw)
	}
}

func TestApprovalRequestValidation(t *testing.T) {
	t.Parallel()
	f := setup(t)
	tests := []struct {
		name, body, code string
		status           int
	}{
		{"no expiry", `{"action":"supplier.create_order","params":{},"policy_version":"p1"}`, "invalid_field", 400},
		{"both expiries", `{"action":"supplier.create_order","params":{},"policy_version":"p1","ttl_seconds":5,"expires_at":"2099-01-01T00:00:00Z"}`, "invalid_field", 400},
		{"expiry in the past", `{"action":"supplier.create_order","params":{},"policy_version":"p1","expires_at":"2001-01-01T00:00:00Z"}`, "invalid_field", 400},
		{"bad time", `{"action":"supplier.create_order","params":{},"policy_version":"p1","expires_at":"tomorrow"}`, "invalid_field", 400},
		{"zero uses", `{"action":"supplier.create_order","params":{},"policy_version":"p1","ttl_seconds":5,"max_uses":0}`, "invalid_field", 400},
		{"no policy", `{"action":"supplier.create_order","params":{},"ttl_seconds":5}`, "invalid_field", 400},
		{"unknown action", `{"action":"rocket.launch","params":{},"policy_version":"p1","ttl_seconds":5}`, "unknown_action", 422},
	}
	for _, tt := range tests {
		r := f.do(t, "POST", "/v1/approvals", f.approver, []byte(tt.body))
		if r.status != tt.status || r.errorCode() != tt.code {
			t.Errorf("%s: got %d %s", tt.name, r.status, r.raw)
		}
	}
	if r := f.do(t, "POST", "/v1/approvals", f.agent, []byte(`{}`)); r.status != 403 {
		t.Errorf("agent creating an approval: %d", r.status)
	}
	if n := f.count(t, "approvals"); n != 0 {
		t.Errorf("approvals = %d, want 0", n)
	}
}

// TestNULEscapeIsRefusedAsAFieldError: Postgres cannot store U+0000, so a
// \u0000 anywhere in params (or in a text field) is the caller's mistake,
// answered 400 naming the field, never a 500; nothing is written.
func TestNULEscapeIsRefusedAsAFieldError(t *testing.T) {
	t.Parallel()
	f := setup(t)
	approval := f.approve(t, `{"sku":"A-1"}`, "")
	approvalBody := func(params, policy string) string {
		return fmt.Sprintf(`{"action":%q,"params":%s,"ttl_seconds":60,"policy_version":"%s"}`, action, params, policy)
	}
	operationBody := func(key, params string) string {
		return fmt.Sprintf(`{"action":%q,"key":"%s","params":%s,"approval_id":%q}`, action, key, params, approval)
	}
	tests := []struct {
		name, path, body, field string
	}{
		{"approval: in a value", "/v1/approvals", approvalBody(`{"sku":"A\u0000"}`, "p1"), "params"},
		{"approval: in a nested member name", "/v1/approvals", approvalBody(`{"a":{"\u0000":1}}`, "p1"), "params"},
		{"approval: in policy_version", "/v1/approvals", approvalBody(`{"sku":"A-1"}`, `p\u0000`), "policy_version"},
		{"operation: in a value", "/v1/operations", operationBody("po-1", `{"sku":"\u0000"}`), "params"},
		{"operation: deep in an array", "/v1/operations", operationBody("po-2", `{"lines":[{"note":"x\u0000y"}]}`), "params"},
		{"operation: after an escaped backslash", "/v1/operations", operationBody("po-3", `{"note":"\\\u0000"}`), "params"},
		{"operation: in the key", "/v1/operations", operationBody(`po\u0000`, `{"sku":"A-1"}`), "key"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			token := f.agent
			if tt.path == "/v1/approvals" {
				token = f.approver
			}
			r := f.do(t, "POST", tt.path, token, []byte(tt.body))
			msg, _ := r.body["error"].(map[string]any)["message"].(string)
			if r.status != 400 || r.errorCode() != "invalid_field" || !strings.HasPrefix(msg, tt.field+":") {
				t.Errorf("got %d %s, want 400 invalid_field naming %s", r.status, r.raw, tt.field)
			}
		})
	}
	t.Cleanup(func() {
		if n, m := f.count(t, "approvals"), f.count(t, "operations"); n != 1 || m != 0 {
			t.Errorf("approvals %d, operations %d; want 1 and 0", n, m)
		}
	})
}

// TestEscapedBackslashBeforeU0000IsOrdinaryText: the text \u0000 (an
// escaped backslash, then "u0000") is storable and must not be refused.
func TestEscapedBackslashBeforeU0000IsOrdinaryText(t *testing.T) {
	t.Parallel()
	f := setup(t)
	approval := f.approve(t, `{"note":"a\\u0000b"}`, "")
	if r := f.do(t, "POST", "/v1/operations", f.agent, opBody("po-1", `{"note":"a\\u0000b"}`, approval)); r.status != 201 {
		t.Errorf("got %d %s, want 201", r.status, r.raw)
	}
}
