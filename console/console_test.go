package console_test

import (
	"context"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/actledger/actledger/auth"
	"github.com/actledger/actledger/internal/testfactory"
	"github.com/actledger/actledger/internal/testpipeline"
	"github.com/actledger/actledger/ledger"
)

// session is a browser-like client of the console: a cookie jar, and
// redirects left to the test.
type session struct {
	t      *testing.T
	base   string
	client *http.Client
}

func newSession(t *testing.T, p *testpipeline.Pipeline) *session {
	t.Helper()
	jar, err := cookiejar.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	// A transport of its own: a parallel test's httptest.Server.Close
	// closes the idle connections of http.DefaultTransport, and a request
	// that had just taken one of them would fail.
	transport := http.DefaultTransport.(*http.Transport).Clone()
	t.Cleanup(transport.CloseIdleConnections)
	return &session{t: t, base: p.API.URL, client: &http.Client{
		Jar:           jar,
		Transport:     transport,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}}
}

// signIn returns a session signed in with token.
func signIn(t *testing.T, p *testpipeline.Pipeline, token string) *session {
	t.Helper()
	s := newSession(t, p)
	res := s.post("/console/signin", url.Values{"token": {token}})
	if res.status != http.StatusSeeOther {
		t.Fatalf("sign in: %d, want 303\n%s", res.status, res.body)
	}
	return s
}

type response struct {
	status   int
	body     string
	location string
	header   http.Header
}

func (s *session) do(req *http.Request) response {
	s.t.Helper()
	res, err := s.client.Do(req)
	if err != nil {
		s.t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return response{status: res.StatusCode, body: string(b), location: res.Header.Get("Location"), header: res.Header}
}

func (s *session) get(path string) response {
	s.t.Helper()
	req, err := http.NewRequest(http.MethodGet, s.base+path, nil)
	if err != nil {
		s.t.Fatal(err)
	}
	return s.do(req)
}

// post sends a form as a same-origin page of the console would.
func (s *session) post(path string, form url.Values, header ...string) response {
	s.t.Helper()
	req, err := http.NewRequest(http.MethodPost, s.base+path, strings.NewReader(form.Encode()))
	if err != nil {
		s.t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Origin", s.base)
	req.Header.Set("Sec-Fetch-Site", "same-origin")
	for i := 0; i+1 < len(header); i += 2 {
		if header[i+1] == "" {
			req.Header.Del(header[i])
			continue
		}
		req.Header.Set(header[i], header[i+1])
	}
	return s.do(req)
}

func setup(t *testing.T) *testpipeline.Pipeline {
	t.Helper()
	return testpipeline.New(t, testpipeline.Options{})
}

// propose submits a proposal as the agent and returns its operation.
func propose(t *testing.T, p *testpipeline.Pipeline, key, params string) ledger.Operation {
	t.Helper()
	status, out := p.Propose(key, params)
	if status != http.StatusAccepted {
		t.Fatalf("propose %s: %d %v", key, status, out)
	}
	return p.Operation(out)
}

// inReview enqueues an operation and moves it to review with reason and
// owner. Call it before the pipeline's dispatcher starts: a running one may
// claim the operation first.
func inReview(t *testing.T, p *testpipeline.Pipeline, key string, reason ledger.ReviewReason, owner string) ledger.Operation {
	t.Helper()
	return testfactory.Operation(t, p.Store, testfactory.OperationOpts{
		Tenant: p.FactoryTenant, Key: key, Params: `{"sku":"A-1","qty":1}`,
		Status: ledger.StatusReview, Review: ledger.Review{Reason: reason, Owner: owner},
	})
}

func principal(t *testing.T, p *testpipeline.Pipeline, token string) auth.Principal {
	t.Helper()
	pr, err := p.Tokens.Authenticate(context.Background(), token)
	if err != nil {
		t.Fatal(err)
	}
	return pr
}

// fingerprintOn reads the fingerprint the approval requests page shows for
// op, as a person would copy it from the page.
func fingerprintOn(t *testing.T, page string, op ledger.Operation) string {
	t.Helper()
	re := regexp.MustCompile(`action="/console/approvals/` + op.ID.String() + `/approve">\s*<input type="hidden" name="params_fingerprint" value="([^"]+)"`)
	m := re.FindStringSubmatch(page)
	if m == nil {
		t.Fatalf("the page shows no approve form for %s:\n%s", op.ID, page)
	}
	return m[1]
}

// TestSignInKeepsASessionInAStrictHttpOnlySessionCookie: the cookie holds
// a session's id, never the token, and has no lifetime of its own (the
// browser forgets it when it closes; the server ends it after
// auth.DefaultSessionLifetime).
func TestSignInKeepsASessionInAStrictHttpOnlySessionCookie(t *testing.T) {
	t.Parallel()
	p := setup(t)
	s := newSession(t, p)
	res := s.post("/console/signin", url.Values{"token": {p.Approver}})
	if res.status != http.StatusSeeOther || res.location != "/console/" {
		t.Fatalf("sign in: %d → %q, want 303 → /console/ (the overview)", res.status, res.location)
	}
	ck := res.header.Get("Set-Cookie")
	for _, want := range []string{"actledger_console=", "Path=/console/", "HttpOnly", "SameSite=Strict"} {
		if !strings.Contains(ck, want) {
			t.Errorf("Set-Cookie %q lacks %q", ck, want)
		}
	}
	if strings.Contains(ck, "Secure") {
		t.Errorf("Set-Cookie %q is Secure over plain HTTP: the browser would never send it back", ck)
	}
	if strings.Contains(ck, p.Approver) || strings.Contains(ck, "Max-Age") || strings.Contains(ck, "Expires") {
		t.Errorf("Set-Cookie %q holds the token or a lifetime; want a session cookie naming a session", ck)
	}
	if got := s.get("/console/approvals"); got.status != http.StatusOK {
		t.Fatalf("approvals after sign in: %d", got.status)
	}
	op := signIn(t, p, p.Operator)
	if res := op.get("/console/"); res.status != http.StatusOK || !strings.Contains(res.body, `id="overview"`) {
		t.Errorf("operator's home: %d, want the overview:\n%s", res.status, res.body)
	}
}

// TestCookieIsSecureBehindAProxyThatEndsTLS: a proxy that ends TLS says
// so with X-Forwarded-Proto, and the session cookie (set at sign-in,
// cleared at sign-out) is then Secure and __Host- prefixed although the
// request reached the console over plain HTTP; there only the prefixed
// cookie is read, so a bare one (which a sibling host of the domain could
// plant) signs no one in.
func TestCookieIsSecureBehindAProxyThatEndsTLS(t *testing.T) {
	t.Parallel()
	p := setup(t)
	s := newSession(t, p)
	res := s.post("/console/signin", url.Values{"token": {p.Approver}}, "X-Forwarded-Proto", "https")
	ck := res.header.Get("Set-Cookie")
	if res.status != http.StatusSeeOther {
		t.Fatalf("sign in behind a TLS proxy: %d", res.status)
	}
	for _, want := range []string{"__Host-actledger_console=", "Path=/;", "Secure", "HttpOnly", "SameSite=Strict"} {
		if !strings.Contains(ck, want) {
			t.Errorf("sign in behind a TLS proxy: Set-Cookie %q lacks %q", ck, want)
		}
	}
	if strings.Contains(ck, "Domain=") {
		t.Errorf("Set-Cookie %q names a Domain: a browser refuses a __Host- cookie with one", ck)
	}
	pair, _, _ := strings.Cut(ck, ";")
	value := strings.TrimPrefix(pair, "__Host-actledger_console=")
	overTLS := func(cookie string) int {
		t.Helper()
		req, err := http.NewRequest(http.MethodGet, p.API.URL+"/console/approvals", nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Cookie", cookie)
		req.Header.Set("X-Forwarded-Proto", "https")
		return newSession(t, p).do(req).status
	}
	if got := overTLS("__Host-actledger_console=" + value); got != http.StatusOK {
		t.Errorf("the __Host- session cookie over TLS: %d, want 200", got)
	}
	if got := overTLS("actledger_console=" + value); got != http.StatusSeeOther {
		t.Errorf("a bare session cookie over TLS: %d, want 303 to the sign-in page (only the __Host- cookie is read there)", got)
	}
	out := s.post("/console/signout", nil, "X-Forwarded-Proto", "https", "Cookie", "__Host-actledger_console="+value)
	if ck := out.header.Get("Set-Cookie"); out.status != http.StatusSeeOther || !strings.Contains(ck, "__Host-actledger_console=;") || !strings.Contains(ck, "Secure") {
		t.Errorf("sign out behind a TLS proxy: %d, Set-Cookie %q; want 303 clearing the __Host- cookie", out.status, ck)
	}
	if got := overTLS("__Host-actledger_console=" + value); got != http.StatusSeeOther {
		t.Errorf("the session cookie after sign-out: %d, want 303 (the session ended on the server)", got)
	}
}

func TestSignInRefusesAgentAndUnknownTokens(t *testing.T) {
	t.Parallel()
	p := setup(t)
	for _, tt := range []struct {
		name, token string
		status      int
		says        string
	}{
		{"agent", p.Agent, http.StatusForbidden, "agent token cannot sign in"},
		{"metrics", p.MetricsToken(), http.StatusForbidden, "metrics token cannot sign in"},
		{"unknown", "al_nonsense", http.StatusUnauthorized, "not valid"},
		{"empty", "", http.StatusUnauthorized, "not valid"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			s := newSession(t, p)
			res := s.post("/console/signin", url.Values{"token": {tt.token}})
			if res.status != tt.status || !strings.Contains(res.body, tt.says) {
				t.Fatalf("sign in: %d, want %d saying %q\n%s", res.status, tt.status, tt.says, res.body)
			}
			if ck := res.header.Get("Set-Cookie"); ck != "" {
				t.Errorf("a refused sign-in set a cookie: %q", ck)
			}
			if res := s.get("/console/approvals"); res.status != http.StatusSeeOther || res.location != "/console/signin" {
				t.Errorf("after a refused sign-in the approvals page answers %d → %q, want the sign-in page", res.status, res.location)
			}
		})
	}
}

func TestSignOutClearsTheSession(t *testing.T) {
	t.Parallel()
	p := setup(t)
	s := signIn(t, p, p.Approver)
	res := s.post("/console/signout", nil)
	if res.status != http.StatusSeeOther || !strings.Contains(res.header.Get("Set-Cookie"), "Max-Age=0") {
		t.Fatalf("sign out: %d, Set-Cookie %q; want 303 and the cookie cleared", res.status, res.header.Get("Set-Cookie"))
	}
	if res := s.get("/console/approvals"); res.status != http.StatusSeeOther || res.location != "/console/signin" {
		t.Errorf("after sign out: %d → %q, want the sign-in page", res.status, res.location)
	}
}

// TestAnOldCookieOpensNothingAfterSignOutOrRevocation: a copy of the
// cookie (kept by the browser, or taken from it) is worth nothing once the
// person signs out, and nothing once the token is revoked: the session
// ends on the server, not only in the browser. Before, the cookie was the
// token itself and opened the approvals page after sign-out.
func TestAnOldCookieOpensNothingAfterSignOutOrRevocation(t *testing.T) {
	t.Parallel()
	p := setup(t)
	withCookie := func(cookie string) response {
		t.Helper()
		req, err := http.NewRequest(http.MethodGet, p.API.URL+"/console/approvals", nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Cookie", cookie)
		return newSession(t, p).do(req)
	}
	cookieOf := func(res response) string {
		t.Helper()
		ck, _, _ := strings.Cut(res.header.Get("Set-Cookie"), ";")
		if !strings.HasPrefix(ck, "actledger_console=") || ck == "actledger_console=" {
			t.Fatalf("no session cookie in %q", res.header.Get("Set-Cookie"))
		}
		return ck
	}
	approver := principal(t, p, p.Approver)
	sessions := func() int {
		t.Helper()
		var n int
		if err := p.Pool.QueryRow(context.Background(), `SELECT count(*) FROM console_sessions WHERE token_id = $1`, approver.TokenID).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}

	s := newSession(t, p)
	old := cookieOf(s.post("/console/signin", url.Values{"token": {p.Approver}}))
	if res := withCookie(old); res.status != http.StatusOK {
		t.Fatalf("the cookie opens the approvals page: %d, want 200", res.status)
	}
	if res := s.post("/console/signout", nil); res.status != http.StatusSeeOther {
		t.Fatalf("sign out: %d", res.status)
	}
	if res := withCookie(old); res.status != http.StatusSeeOther || res.location != "/console/signin" {
		t.Errorf("the cookie of a signed-out session: %d → %q, want the sign-in page", res.status, res.location)
	}
	if n := sessions(); n != 0 {
		t.Errorf("sessions after sign-out: %d, want 0", n)
	}

	again := cookieOf(newSession(t, p).post("/console/signin", url.Values{"token": {p.Approver}}))
	if res := withCookie(again); res.status != http.StatusOK {
		t.Fatalf("a new sign-in's cookie: %d, want 200", res.status)
	}
	if _, err := p.CLITokens().Revoke(context.Background(), approver.Name, "test"); err != nil {
		t.Fatal(err)
	}
	for name, cookie := range map[string]string{"signed-out": old, "live": again} {
		if res := withCookie(cookie); res.status != http.StatusSeeOther || res.location != "/console/signin" {
			t.Errorf("the %s session's cookie after the token's revocation: %d → %q, want the sign-in page", name, res.status, res.location)
		}
	}
	if n := sessions(); n != 0 {
		t.Errorf("sessions after the revocation: %d, want 0 (deleted with the token)", n)
	}
	// The token itself as a cookie opens nothing either.
	if res := withCookie("actledger_console=" + p.Operator); res.status != http.StatusSeeOther {
		t.Errorf("a token as the cookie: %d, want the sign-in page", res.status)
	}
}

func TestRevokedTokenStopsWorkingAtOnce(t *testing.T) {
	t.Parallel()
	p := setup(t)
	op := propose(t, p, "po-rev", `{"sku":"A-1","qty":2}`)
	s := signIn(t, p, p.Approver)
	page := s.get("/console/approvals")
	fp := fingerprintOn(t, page.body, op)
	if _, err := p.CLITokens().Revoke(context.Background(), principal(t, p, p.Approver).Name, "test"); err != nil {
		t.Fatal(err)
	}
	if res := s.get("/console/approvals"); res.status != http.StatusSeeOther || res.location != "/console/signin" {
		t.Errorf("GET with a revoked token: %d → %q, want the sign-in page", res.status, res.location)
	}
	res := s.post("/console/approvals/"+op.ID.String()+"/approve", url.Values{"params_fingerprint": {fp}})
	if res.status != http.StatusUnauthorized {
		t.Errorf("approve with a revoked token: %d, want 401", res.status)
	}
	if got := p.Get(op); got.Status != ledger.StatusAwaitingApproval {
		t.Errorf("the proposal is %s after a revoked token's approve, want awaiting_approval", got.Status)
	}
}

func TestCrossOriginPostIsRefused(t *testing.T) {
	t.Parallel()
	p := setup(t)
	op := propose(t, p, "po-csrf", `{"sku":"A-1","qty":3}`)
	s := signIn(t, p, p.Approver)
	fp := fingerprintOn(t, s.get("/console/approvals").body, op)
	form := url.Values{"params_fingerprint": {fp}}
	for _, tt := range []struct {
		name   string
		header []string
	}{
		{"Sec-Fetch-Site cross-site", []string{"Sec-Fetch-Site", "cross-site"}},
		{"Origin of another site", []string{"Sec-Fetch-Site", "", "Origin", "https://evil.example"}},
	} {
		res := s.post("/console/approvals/"+op.ID.String()+"/approve", form, tt.header...)
		if res.status != http.StatusForbidden || !strings.Contains(res.body, "another site") {
			t.Errorf("%s: %d, want 403 refused\n%s", tt.name, res.status, res.body)
		}
	}
	if got := p.Get(op); got.Status != ledger.StatusAwaitingApproval {
		t.Fatalf("the proposal is %s after cross-origin posts, want awaiting_approval", got.Status)
	}
	// The console's own page may.
	if res := s.post("/console/approvals/"+op.ID.String()+"/approve", form); res.status != http.StatusSeeOther {
		t.Fatalf("same-origin approve: %d\n%s", res.status, res.body)
	}
	if got := p.Get(op); got.Status != ledger.StatusQueued {
		t.Errorf("the proposal is %s after the same-origin approve, want queued", got.Status)
	}
}

func TestApprovalRequestsShowHostileParamsEscaped(t *testing.T) {
	t.Parallel()
	p := setup(t)
	op := propose(t, p, `po-<b>key</b>`, `{"sku":"<script>alert(1)</script>","qty":1,"note":"\" onmouseover=\"x"}`)
	s := signIn(t, p, p.Approver)
	res := s.get("/console/approvals")
	if res.status != http.StatusOK {
		t.Fatalf("approvals: %d", res.status)
	}
	for _, bad := range []string{"<script>alert", "<b>key</b>", `" onmouseover="x`} {
		if strings.Contains(res.body, bad) {
			t.Errorf("the page holds %q unescaped", bad)
		}
	}
	for _, want := range []string{"&lt;script&gt;alert(1)&lt;/script&gt;", "po-&lt;b&gt;key&lt;/b&gt;", op.ParamsFingerprint,
		principal(t, p, p.Agent).Name, "restock", "acct_test"} {
		if !strings.Contains(res.body, want) {
			t.Errorf("the page does not show %q", want)
		}
	}
	if csp := res.header.Get("Content-Security-Policy"); !strings.Contains(csp, "default-src 'none'") {
		t.Errorf("Content-Security-Policy = %q, want no script allowed", csp)
	}
}

func TestApproveEchoesTheFingerprintShownAndRefusesAStaleOne(t *testing.T) {
	t.Parallel()
	p := setup(t)
	op := propose(t, p, "po-1", `{"sku":"A-1","qty":5}`)
	other := propose(t, p, "po-2", `{"sku":"B-2","qty":7}`)
	s := signIn(t, p, p.Approver)
	page := s.get("/console/approvals").body
	fp, otherFP := fingerprintOn(t, page, op), fingerprintOn(t, page, other)
	if fp != op.ParamsFingerprint {
		t.Fatalf("the page shows fingerprint %q, the proposal's is %q", fp, op.ParamsFingerprint)
	}

	res := s.post("/console/approvals/"+op.ID.String()+"/approve", url.Values{"params_fingerprint": {otherFP}})
	if res.status != http.StatusConflict || !strings.Contains(res.body, "fingerprint_mismatch") {
		t.Fatalf("approve with another proposal's fingerprint: %d, want 409 fingerprint_mismatch\n%s", res.status, res.body)
	}
	if got := p.Get(op); got.Status != ledger.StatusAwaitingApproval {
		t.Fatalf("after a mismatched approve the proposal is %s", got.Status)
	}

	res = s.post("/console/approvals/"+op.ID.String()+"/approve", url.Values{"params_fingerprint": {fp}, "note": {"ok"}})
	if res.status != http.StatusSeeOther {
		t.Fatalf("approve: %d\n%s", res.status, res.body)
	}
	if got := p.Get(op); got.Status != ledger.StatusQueued {
		t.Fatalf("after approve the proposal is %s, want queued", got.Status)
	}
	if after := s.get(res.location).body; !strings.Contains(after, "Approved "+op.ID.String()) || strings.Contains(after, `/console/approvals/`+op.ID.String()+`/approve"`) {
		t.Errorf("after approve the page does not confirm it or still offers it:\n%s", after)
	}

	// Decided elsewhere (here: a second click on a stale page).
	res = s.post("/console/approvals/"+op.ID.String()+"/approve", url.Values{"params_fingerprint": {fp}})
	if res.status != http.StatusConflict || !strings.Contains(res.body, "not awaiting approval") {
		t.Errorf("approve of a decided proposal: %d, want 409 not awaiting approval\n%s", res.status, res.body)
	}
	res = s.post("/console/approvals/"+op.ID.String()+"/deny", url.Values{"reason": {"too late"}})
	if res.status != http.StatusConflict || !strings.Contains(res.body, "not awaiting approval") {
		t.Errorf("deny of a decided proposal: %d, want 409\n%s", res.status, res.body)
	}
}

func TestDenyNeedsAReason(t *testing.T) {
	t.Parallel()
	p := setup(t)
	op := propose(t, p, "po-deny", `{"sku":"A-1","qty":9}`)
	s := signIn(t, p, p.Approver)
	if res := s.post("/console/approvals/"+op.ID.String()+"/deny", url.Values{"reason": {""}}); res.status != http.StatusBadRequest || !strings.Contains(res.body, "reason") {
		t.Fatalf("deny without a reason: %d\n%s", res.status, res.body)
	}
	if got := p.Get(op); got.Status != ledger.StatusAwaitingApproval {
		t.Fatalf("after a refused deny the proposal is %s", got.Status)
	}
	if res := s.post("/console/approvals/"+op.ID.String()+"/deny", url.Values{"reason": {"wrong supplier"}}); res.status != http.StatusSeeOther {
		t.Fatalf("deny: %d\n%s", res.status, res.body)
	}
	if got := p.Get(op); got.Status != ledger.StatusCancelled || got.DecisionReason == nil || *got.DecisionReason != "wrong supplier" {
		t.Errorf("after deny the proposal is %s (reason %v), want cancelled with the reason", got.Status, got.DecisionReason)
	}
}

func TestPagesCheckTheRole(t *testing.T) {
	t.Parallel()
	p := setup(t)
	op := propose(t, p, "po-role", `{"sku":"A-1","qty":1}`)
	approver, operator := signIn(t, p, p.Approver), signIn(t, p, p.Operator)
	for _, tt := range []struct {
		name   string
		s      *session
		method string
		path   string
	}{
		{"operator reads approval requests", operator, "GET", "/console/approvals"},
		{"operator approves", operator, "POST", "/console/approvals/" + op.ID.String() + "/approve"},
		{"operator denies", operator, "POST", "/console/approvals/" + op.ID.String() + "/deny"},
		{"approver reads the review queue", approver, "GET", "/console/review"},
		{"approver resolves", approver, "POST", "/console/review"},
		{"approver reads dispatch", approver, "GET", "/console/dispatch"},
		{"approver pauses", approver, "POST", "/console/dispatch/pause"},
		{"approver resumes", approver, "POST", "/console/dispatch/resume"},
	} {
		var res response
		if tt.method == "GET" {
			res = tt.s.get(tt.path)
		} else {
			res = tt.s.post(tt.path, url.Values{"params_fingerprint": {op.ParamsFingerprint}, "reason": {"x"}, "item": {"op:" + op.ID.String()},
				"do": {"resolve_cancelled"}, "note": {"x"}})
		}
		if res.status != http.StatusForbidden {
			t.Errorf("%s: %d, want 403", tt.name, res.status)
		}
		if role := strings.SplitN(tt.name, " ", 2)[0]; !strings.Contains(res.body, "Tokens of role "+role+" may not use this page") {
			t.Errorf("%s: the refusal does not name the role in plain words:\n%s", tt.name, res.body)
		}
	}
	if got := p.Get(op); got.Status != ledger.StatusAwaitingApproval {
		t.Errorf("the proposal is %s after refused requests", got.Status)
	}
	if paused, err := p.Store.Pauses(context.Background(), p.TenantID); err != nil || len(paused) != 0 {
		t.Errorf("pauses after refused requests: %v %v", paused, err)
	}
}

// TestEveryPostRefusesAnotherOrigin: each state-changing route, sign-in
// included (a forged sign-in would put the victim in the attacker's
// account), refuses a post from another origin, whether the browser says
// so with Sec-Fetch-Site, Origin or only Referer; nothing changes.
func TestEveryPostRefusesAnotherOrigin(t *testing.T) {
	t.Parallel()
	p := setup(t)
	op := propose(t, p, "po-xo", `{"sku":"A-1","qty":3}`)
	review := inReview(t, p, "po-xo-review", ledger.ReasonOutcomeUnknown, "ops")
	approver, operator := signIn(t, p, p.Approver), signIn(t, p, p.Operator)
	for _, tt := range []struct {
		path string
		s    *session
		form url.Values
	}{
		{"/console/signin", newSession(t, p), url.Values{"token": {p.Operator}}},
		{"/console/signout", approver, nil},
		{"/console/approvals/" + op.ID.String() + "/approve", approver, url.Values{"params_fingerprint": {op.ParamsFingerprint}}},
		{"/console/approvals/" + op.ID.String() + "/deny", approver, url.Values{"reason": {"no"}}},
		{"/console/review", operator, url.Values{"item": {"op:" + review.ID.String()}, "do": {"resolve_cancelled"}, "note": {"x"}}},
		{"/console/dispatch/pause", operator, url.Values{"provider": {"acme"}}},
		{"/console/dispatch/resume", operator, url.Values{}},
	} {
		for _, header := range [][]string{
			{"Sec-Fetch-Site", "cross-site"},
			{"Sec-Fetch-Site", "same-site"},
			{"Sec-Fetch-Site", "", "Origin", "http://evil.example"},
			{"Sec-Fetch-Site", "", "Origin", "", "Referer", "http://evil.example/prize"},
		} {
			res := tt.s.post(tt.path, tt.form, header...)
			if res.status != http.StatusForbidden || !strings.Contains(res.body, "another site") {
				t.Errorf("POST %s with %v: %d, want 403 refused", tt.path, header, res.status)
			}
			if ck := res.header.Get("Set-Cookie"); ck != "" {
				t.Errorf("POST %s with %v set a cookie: %q", tt.path, header, ck)
			}
		}
	}
	if got := p.Get(op); got.Status != ledger.StatusAwaitingApproval {
		t.Errorf("the proposal is %s after cross-origin posts", got.Status)
	}
	if got := p.Get(review); got.Status != ledger.StatusReview {
		t.Errorf("the review item is %s after cross-origin posts", got.Status)
	}
	if paused, err := p.Store.Pauses(context.Background(), p.TenantID); err != nil || len(paused) != 0 {
		t.Errorf("pauses after cross-origin posts: %v %v", paused, err)
	}
	if res := approver.get("/console/approvals"); res.status != http.StatusOK {
		t.Errorf("the approver's session after a cross-origin sign-out: %d, want still signed in", res.status)
	}
}

// TestPostsThatNameNoForeignOriginAreAccepted: a post whose only word on
// its origin is a Referer of the console itself (an older browser posting
// a console form), or that names no origin at all (a script: every
// browser names the origin of a form it posts across sites, so such a
// client holds its cookie of its own accord, as http.CrossOriginProtection
// assumes), is not refused.
func TestPostsThatNameNoForeignOriginAreAccepted(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name    string
		referer func(s *session) string
	}{
		{"a script that names no origin", func(*session) string { return "" }},
		{"a form of the console's own page", func(s *session) string { return s.base + "/console/dispatch" }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			p := setup(t)
			s := signIn(t, p, p.Operator)
			res := s.post("/console/dispatch/pause", url.Values{"provider": {"acme"}},
				"Sec-Fetch-Site", "", "Origin", "", "Referer", tc.referer(s))
			if res.status != http.StatusSeeOther {
				t.Fatalf("pause posted by %s: %d, want 303\n%s", tc.name, res.status, res.body)
			}
			if paused, err := p.Store.Pauses(context.Background(), p.TenantID); err != nil || len(paused) != 1 {
				t.Errorf("pauses = %v, %v; want the one posted", paused, err)
			}
		})
	}
}

// TestApprovalRequestsShowInvisibleCharactersOfParamsAndReason: what the
// approver sees is what is approved, so characters a browser would not
// show as themselves (a right-to-left override that reorders the text
// after it, a zero-width space, a control character) are shown as their
// JSON escapes in the params and the reason, never raw. (The API refuses
// them in a key; TestCharactersThatRenderAsNothingAreShownEscaped shows
// one stored before that rule.)
func TestApprovalRequestsShowInvisibleCharactersOfParamsAndReason(t *testing.T) {
	t.Parallel()
	p := setup(t)
	status, out := p.Do("POST", "/v1/operations", p.Agent, `{"action":"`+testpipeline.Action+`","key":"po-91","params":{"sku":"A-1\u200b","qty":1,"ship_to":"Lyon\u202e\u0007","tag":"x\udb40\udc41"},"request_approval":true,"reason":"restock \u202eurgent"}`)
	if status != http.StatusAccepted {
		t.Fatalf("propose: %d %v", status, out)
	}
	op := p.Operation(out)
	s := signIn(t, p, p.Approver)
	for _, page := range []string{"/console/approvals", "/console/operations/" + op.ID.String()} {
		res := s.get(page)
		if res.status != http.StatusOK {
			t.Fatalf("%s: %d", page, res.status)
		}
		for _, raw := range []string{"\u202e", "\u200b", "\u0007", "\U000E0041"} {
			if strings.Contains(res.body, raw) {
				t.Errorf("%s holds %U raw", page, []rune(raw)[0])
			}
		}
		for _, want := range []string{`A-1\u200b`, `Lyon\u202e\u0007`, `x\udb40\udc41`} {
			if !strings.Contains(res.body, want) {
				t.Errorf("%s does not show %s", page, want)
			}
		}
	}
	if res := s.get("/console/approvals"); !strings.Contains(res.body, `restock \u202eurgent`) {
		t.Errorf("the approvals page does not show the reason's override escaped")
	}
}

// TestHostileReasonsAreShownEscaped: the agent's reason on the approval
// requests page and the approver's deny reason on the operation page (its
// summary and timeline) are text, never markup.
func TestHostileReasonsAreShownEscaped(t *testing.T) {
	t.Parallel()
	p := setup(t)
	status, out := p.Do("POST", "/v1/operations", p.Agent, `{"action":"`+testpipeline.Action+`","key":"po-r","params":{"sku":"A-1","qty":1},"request_approval":true,"reason":"<script>alert('agent')</script>"}`)
	if status != http.StatusAccepted {
		t.Fatalf("propose: %d %v", status, out)
	}
	op := p.Operation(out)
	s := signIn(t, p, p.Approver)
	page := s.get("/console/approvals")
	if strings.Contains(page.body, "<script>") || !strings.Contains(page.body, "&lt;script&gt;alert(&#39;agent&#39;)&lt;/script&gt;") {
		t.Errorf("the agent's reason is not shown escaped:\n%s", page.body)
	}
	if res := s.post("/console/approvals/"+op.ID.String()+"/deny", url.Values{"reason": {`<script>alert("deny")</script>`}}); res.status != http.StatusSeeOther {
		t.Fatalf("deny: %d\n%s", res.status, res.body)
	}
	page = s.get("/console/operations/" + op.ID.String())
	if page.status != http.StatusOK || strings.Contains(page.body, "<script>") || !strings.Contains(page.body, "&lt;script&gt;alert(&#34;deny&#34;)&lt;/script&gt;") {
		t.Errorf("the deny reason is not shown escaped (%d):\n%s", page.status, page.body)
	}
}

// TestCharactersThatRenderAsNothingAreShownEscaped: characters outside
// Unicode's format category that a browser still shows as nothing (Hangul
// fillers, the combining grapheme joiner, the blank Braille pattern,
// variation selectors, a no-break space) are shown as their escapes in
// the params, the key, the reason and the summary, so "A-1\u3164\u034f"
// never reads as "A-1".
func TestCharactersThatRenderAsNothingAreShownEscaped(t *testing.T) {
	t.Parallel()
	p := setup(t)
	agent, err := p.Tokens.Authenticate(context.Background(), p.Agent)
	if err != nil {
		t.Fatal(err)
	}
	// A key the API now refuses can still be in the ledger (stored before
	// the rule): the console shows it escaped all the same.
	hidden := "\u3164\u034f\uffa0\u115f\u1160\u2800\ufe0f\U000E0100\u00a0"
	op, _, err := p.Store.Propose(context.Background(), ledger.ProposeRequest{
		TenantID: p.TenantID, TokenID: agent.TokenID, Actor: agent.Actor(), Action: testpipeline.Action,
		Key: "po-7" + hidden, Provider: "acme", Params: []byte(`{"sku":"A-1` + hidden + `","qty":1}`),
		Reason: "restock" + hidden, RequestTTL: time.Hour,
	})
	if err != nil {
		t.Fatal(err)
	}
	const escaped = `\u3164\u034f\uffa0\u115f\u1160\u2800\ufe0f\udb40\udd00\u00a0`
	s := signIn(t, p, p.Approver)
	for _, page := range []string{"/console/approvals", "/console/operations/" + op.ID.String()} {
		res := s.get(page)
		if res.status != http.StatusOK {
			t.Fatalf("%s: %d", page, res.status)
		}
		for _, r := range hidden {
			if strings.ContainsRune(res.body, r) {
				t.Errorf("%s holds %U raw", page, r)
			}
		}
		for _, want := range []string{`A-1` + escaped, `po-7` + escaped} {
			if !strings.Contains(res.body, want) {
				t.Errorf("%s does not show %s", page, want)
			}
		}
	}
	if res := s.get("/console/approvals"); !strings.Contains(res.body, `restock`+escaped) {
		t.Errorf("the approvals page does not show the reason's invisible characters escaped")
	}
}
