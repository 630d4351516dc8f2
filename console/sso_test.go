package console_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"html"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/golang-jwt/jwt/v5"
	"github.com/oauth2-proxy/mockoidc"

	"github.com/actledger/actledger/internal/testpipeline"
	"github.com/actledger/actledger/internal/testreceiver"
	"github.com/actledger/actledger/ledger"
)

// These tests sign people in against an OpenID provider the project did
// not write (github.com/oauth2-proxy/mockoidc, run in the test): its
// discovery, keys, authorization endpoint (which signs in the next queued
// user without a login form), token endpoint with PKCE and nonce.

// idp is a running OpenID provider.
type idp struct {
	*mockoidc.MockOIDC
}

func newIDP(t *testing.T) idp {
	t.Helper()
	m, err := mockoidc.Run()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = m.Shutdown() })
	return idp{m}
}

// person is a user of the identity provider with claims of any shape.
type person struct {
	subject, email, name string
	// groups is the groups claim as the provider sends it: a list, or
	// (misconfigured) a string.
	groups any
	// unverified makes email_verified false.
	unverified bool
}

func (u person) ID() string { return u.subject }

func (u person) Userinfo([]string) ([]byte, error) { return []byte(`{}`), nil }

// personClaims is an ID token's claims: the provider's registered claims
// and nonce, then the person's.
type personClaims struct {
	*mockoidc.IDTokenClaims
	Email         string `json:"email,omitempty"`
	EmailVerified bool   `json:"email_verified"`
	Name          string `json:"name,omitempty"`
	Groups        any    `json:"groups,omitempty"`
}

func (u person) Claims(_ []string, base *mockoidc.IDTokenClaims) (jwt.Claims, error) {
	return &personClaims{IDTokenClaims: base, Email: u.email, EmailVerified: !u.unverified, Name: u.name, Groups: u.groups}, nil
}

// accessSection is the providers file's access: section for the
// provider: purchasing approvers approve, ops people of the company's
// domain operate, both for the whole tenant.
func accessSection(m idp, tenant string) string {
	return fmt.Sprintf(`  oidc:
    issuer: %s
    client_id: %s
    client_secret_env: OIDC_CLIENT_SECRET
  people:
    - when: '"purchasing-approvers" in claims.groups'
      tenant: %q
      role: approver
    - when: 'claims.email.endsWith("@acme.example") && "ops" in claims.groups'
      tenant: %q
      role: operator
`, m.Issuer(), m.ClientID, tenant, tenant)
}

func ssoPipeline(t *testing.T, m idp) *testpipeline.Pipeline {
	t.Helper()
	return testpipeline.New(t, testpipeline.Options{
		Access: accessSection(m, "Acme Corp."),
		Env:    map[string]string{"OIDC_CLIENT_SECRET": m.ClientSecret},
	})
}

// startSignIn presses "Sign in with your organisation" and returns the
// identity provider's address the console sent the browser to.
func (s *session) startSignIn(returnTo string) string {
	s.t.Helper()
	res := s.post("/console/signin/oidc", url.Values{"return": {returnTo}})
	if res.status != http.StatusSeeOther {
		s.t.Fatalf("start sign-in: %d, want 303\n%s", res.status, res.body)
	}
	return res.location
}

// authorize is the identity provider's answer to the browser: the
// callback address it redirects to.
func (s *session) authorize(authURL string) string {
	s.t.Helper()
	res := s.getURL(authURL)
	if res.status != http.StatusFound {
		s.t.Fatalf("authorize: %d, want 302\n%s", res.status, res.body)
	}
	return res.location
}

// getURL is get for an absolute address, as a browser follows one.
func (s *session) getURL(raw string) response {
	s.t.Helper()
	req, err := http.NewRequest(http.MethodGet, raw, nil)
	if err != nil {
		s.t.Fatal(err)
	}
	return s.do(req)
}

// signInAs signs u in through the identity provider and returns the
// callback's answer.
func (s *session) signInAs(m idp, u person) response {
	s.t.Helper()
	m.QueueUser(u)
	return s.getURL(s.authorize(s.startSignIn("/console/approvals")))
}

var nextPage = regexp.MustCompile(`<a id="continue" href="([^"]+)"`)

func TestPersonSignedInWithTheIdentityProviderApprovesAndTheHistoryNamesThem(t *testing.T) {
	t.Parallel()
	m := newIDP(t)
	secret := testreceiver.Secret(t)
	rc := testreceiver.New(t, nil)
	p := testpipeline.New(t, testpipeline.Options{
		Access:        accessSection(m, "Acme Corp."),
		Env:           map[string]string{"OIDC_CLIENT_SECRET": m.ClientSecret, "NOTIFY_SECRET": secret},
		Notifications: fmt.Sprintf("  settled:\n    url: %s\n    secret_env: NOTIFY_SECRET\n    tenant: \"Acme Corp.\"\n    events: [operation.settled]\n", rc.URL),
	})
	op := propose(t, p, "po-sso", `{"sku":"A-1","qty":2}`)

	s := newSession(t, p)
	ann := person{subject: "00u1ann", email: "ann@acme.example", name: "Ann Example", groups: []string{"purchasing-approvers"}}
	res := s.signInAs(m, ann)
	if res.status != http.StatusOK || !strings.Contains(res.body, "Signed in as Ann Example") {
		t.Fatalf("callback: %d, want the signed-in page\n%s", res.status, res.body)
	}
	next := nextPage.FindStringSubmatch(res.body)
	if next == nil || html.UnescapeString(next[1]) != "/console/approvals" {
		t.Fatalf("the signed-in page leads to %v, want /console/approvals", next)
	}
	page := s.get("/console/approvals")
	if page.status != http.StatusOK || !strings.Contains(page.body, "Ann Example · approver") {
		t.Fatalf("approvals after sign-in: %d\n%s", page.status, page.body)
	}
	fp := fingerprintOn(t, page.body, op)
	if res := s.post("/console/approvals/"+op.ID.String()+"/approve", url.Values{"params_fingerprint": {fp}}); res.status != http.StatusSeeOther {
		t.Fatalf("approve: %d\n%s", res.status, res.body)
	}
	p.Start(1)
	got := p.WaitStatus(op, ledger.StatusSucceeded, 15*time.Second)
	if n := p.Orders(got); n != 1 {
		t.Errorf("orders at the supplier = %d, want 1", n)
	}
	events, err := p.Store.Events(context.Background(), ledger.WholeTenant(p.TenantID), op.ID)
	if err != nil {
		t.Fatal(err)
	}
	var approvedBy string
	var detail struct{ Person ledger.Person }
	for _, e := range events {
		if e.Kind == ledger.EventApproved {
			approvedBy = e.Actor
			if err := json.Unmarshal(e.Detail, &detail); err != nil {
				t.Fatal(err)
			}
		}
	}
	if approvedBy != "person:ann@acme.example" {
		t.Errorf("the approval's event names %q, want person:ann@acme.example\n%s", approvedBy, p.History(op))
	}
	want := ledger.Person{Issuer: m.Issuer(), Subject: "00u1ann", Email: "ann@acme.example", Name: "Ann Example"}
	if detail.Person != want {
		t.Errorf("the approval's event holds the person %+v, want %+v", detail.Person, want)
	}
	status, out := p.Do(http.MethodGet, "/v1/operations/"+op.ID.String()+"/events", p.Agent, "")
	if status != http.StatusOK || !strings.Contains(fmt.Sprint(out["events"]), "actor:person:ann@acme.example") {
		t.Errorf("GET /v1/operations/{id}/events: %d, want an event by person:ann@acme.example\n%v", status, out)
	}
	if status, out := p.Do(http.MethodGet, "/v1/operations/"+op.ID.String(), p.Agent, ""); status != http.StatusOK || out["approved_by"] != "person:ann@acme.example" {
		t.Errorf("GET /v1/operations/{id}: %d approved_by %v, want person:ann@acme.example", status, out["approved_by"])
	}
	p.Eventually(10*time.Second, "the operation.settled notification", func() bool { return len(rc.Distinct()) > 0 })
	if e := rc.Distinct()[0].Event(t); e.Type != "operation.settled" || e.Data["approved_by"] != "person:ann@acme.example" {
		t.Errorf("the notification is %s with approved_by %v, want operation.settled naming person:ann@acme.example", e.Type, e.Data["approved_by"])
	}
}

func TestSignInWithTheIdentityProviderRefusesWithoutASession(t *testing.T) {
	t.Parallel()
	m := newIDP(t)
	p := ssoPipeline(t, m)
	approver := person{subject: "00u2", email: "bo@acme.example", name: "Bo", groups: []string{"purchasing-approvers"}}
	tests := []struct {
		name string
		// run drives a browser through a sign-in and returns the
		// callback's answer.
		run    func(t *testing.T, s *session) response
		status int
		says   string
	}{
		{"no rule admits the person", func(t *testing.T, s *session) response {
			return s.signInAs(m, person{subject: "00u3", email: "cy@elsewhere.example", groups: []string{"sales"}})
		}, http.StatusForbidden, "You are signed in as cy@elsewhere.example at " + m.Issuer() + ", but no rule of this deployment admits you"},
		{"groups is a string, not a list", func(t *testing.T, s *session) response {
			return s.signInAs(m, person{subject: "00u4", email: "di@acme.example", groups: "purchasing-approvers"})
		}, http.StatusForbidden, "no rule of this deployment admits you"},
		{"the state is used twice", func(t *testing.T, s *session) response {
			m.QueueUser(approver)
			callback := s.authorize(s.startSignIn("/console/"))
			if res := s.getURL(callback); res.status != http.StatusOK {
				t.Fatalf("first callback: %d\n%s", res.status, res.body)
			}
			s.post("/console/signout", nil)
			// The browser replays the callback, pending cookie and all.
			s.client.Jar.SetCookies(mustURL(t, p.API.URL+"/console/"), []*http.Cookie{{Name: "actledger_signin", Value: "replayed", Path: "/console/"}})
			return s.getURL(callback)
		}, http.StatusBadRequest, "was used already or expired"},
		{"the callback comes without a pending sign-in", func(t *testing.T, s *session) response {
			return s.get("/console/oidc/callback?state=x&code=y")
		}, http.StatusBadRequest, "No sign-in was started in this browser"},
		{"another browser's callback", func(t *testing.T, s *session) response {
			m.QueueUser(approver)
			other := newSession(t, p)
			callback := other.authorize(other.startSignIn("/console/"))
			s.startSignIn("/console/") // this browser has a pending sign-in of its own
			return s.getURL(callback)
		}, http.StatusBadRequest, "was not started in this browser"},
		{"the ID token has expired", func(t *testing.T, s *session) response {
			m.QueueUser(approver)
			callback := s.authorize(s.startSignIn("/console/"))
			m.FastForward(-2 * m.AccessTTL)
			defer m.FastForward(2 * m.AccessTTL)
			return s.getURL(callback)
		}, http.StatusUnauthorized, "could not be verified"},
		{"the identity provider refuses", func(t *testing.T, s *session) response {
			s.startSignIn("/console/")
			return s.get("/console/oidc/callback?error=access_denied&state=x")
		}, http.StatusUnauthorized, "did not sign you in (access_denied)"},
		{"a link puts its own words in the error", func(t *testing.T, s *session) response {
			s.startSignIn("/console/")
			return s.get("/console/oidc/callback?error=" + url.QueryEscape("Your account is locked, call +1 555 0100") + "&state=x")
		}, http.StatusUnauthorized, "did not sign you in (an error)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := newSession(t, p)
			res := tt.run(t, s)
			if res.status != tt.status || !strings.Contains(html.UnescapeString(res.body), tt.says) {
				t.Errorf("callback: %d, want %d saying %q\n%s", res.status, tt.status, tt.says, res.body)
			}
			if page := s.get("/console/"); page.status != http.StatusSeeOther {
				t.Errorf("the overview after a refused sign-in: %d, want a redirect to sign in: no session was made", page.status)
			}
		})
	}
}

func TestSignInReturnsOnlyToAConsolePath(t *testing.T) {
	t.Parallel()
	m := newIDP(t)
	p := ssoPipeline(t, m)
	for _, returnTo := range []string{"//evil.example/console/", "https://evil.example/console/", "/\\evil.example", "/console/../v1/operations", "javascript:alert(1)"} {
		s := newSession(t, p)
		m.QueueUser(person{subject: "00u5", email: "ed@acme.example", groups: []string{"purchasing-approvers"}})
		res := s.getURL(s.authorize(s.startSignIn(returnTo)))
		next := nextPage.FindStringSubmatch(res.body)
		if next == nil || html.UnescapeString(next[1]) != "/console/" {
			t.Errorf("return %q: the signed-in page leads to %v, want /console/", returnTo, next)
		}
	}
}

func TestANameWithControlCharactersIsShownEscaped(t *testing.T) {
	t.Parallel()
	m := newIDP(t)
	p := ssoPipeline(t, m)
	s := newSession(t, p)
	res := s.signInAs(m, person{subject: "00u6", email: "fi@acme.example", name: "Fi\u202eelgoog\u0007", groups: []string{"purchasing-approvers"}})
	if res.status != http.StatusOK {
		t.Fatalf("callback: %d\n%s", res.status, res.body)
	}
	page := s.get("/console/approvals")
	if strings.ContainsAny(page.body, "\u202e\u0007") {
		t.Errorf("the page holds the name's control characters as they are:\n%s", page.body)
	}
	if !strings.Contains(page.body, `Fi\u202eelgoog\u0007`) {
		t.Errorf("the name is not shown escaped:\n%s", page.body)
	}
}

func TestAnIdentityProviderThatIsDownLeavesTokenSignInWorking(t *testing.T) {
	t.Parallel()
	m := newIDP(t)
	section := accessSection(m, "Acme Corp.")
	if err := m.Shutdown(); err != nil {
		t.Fatal(err)
	}
	p := testpipeline.New(t, testpipeline.Options{Access: section, Env: map[string]string{"OIDC_CLIENT_SECRET": "s"}})
	s := newSession(t, p)
	res := s.post("/console/signin/oidc", url.Values{})
	if res.status != http.StatusServiceUnavailable || !strings.Contains(res.body, "cannot be reached right now") {
		t.Errorf("sign-in with the provider down: %d\n%s", res.status, res.body)
	}
	signIn(t, p, p.Approver)
}

func mustURL(t *testing.T, raw string) *url.URL {
	t.Helper()
	u, err := url.Parse(raw)
	if err != nil {
		t.Fatal(err)
	}
	return u
}

// tamperingIDP is an identity provider whose token endpoint's ID token is
// rewritten by tamper before it reaches the console.
func tamperingIDP(t *testing.T, tamper *atomic.Pointer[func(t *testing.T, m *mockoidc.MockOIDC, idToken string) string]) idp {
	t.Helper()
	m, err := mockoidc.NewServer(nil)
	if err != nil {
		t.Fatal(err)
	}
	err = m.AddMiddleware(func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			f := tamper.Load()
			if r.URL.Path != mockoidc.TokenEndpoint || f == nil {
				next.ServeHTTP(w, r)
				return
			}
			rec := httptest.NewRecorder()
			next.ServeHTTP(rec, r)
			var body map[string]any
			if err := json.Unmarshal(rec.Body.Bytes(), &body); err != nil || body["id_token"] == nil {
				// Not a token (x/oauth2 first tries the client's
				// credentials in a header, which this provider refuses):
				// as it was.
				w.WriteHeader(rec.Code)
				_, _ = w.Write(rec.Body.Bytes())
				return
			}
			body["id_token"] = (*f)(t, m, body["id_token"].(string))
			w.Header().Set("Content-Type", "application/json")
			_ = json.NewEncoder(w).Encode(body)
		})
	})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Start(ln, nil); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = m.Shutdown() })
	return idp{m}
}

// resigned is the ID token's claims changed by edit, signed with the
// provider's own key: a token the provider could have issued.
func resigned(t *testing.T, m *mockoidc.MockOIDC, idToken string, edit func(jwt.MapClaims)) string {
	t.Helper()
	claims := jwt.MapClaims{}
	if _, _, err := jwt.NewParser().ParseUnverified(idToken, claims); err != nil {
		t.Fatal(err)
	}
	edit(claims)
	signed, err := m.Keypair.SignJWT(claims)
	if err != nil {
		t.Fatal(err)
	}
	return signed
}

func TestIDTokensThatDoNotProveThePersonAreRefused(t *testing.T) {
	t.Parallel()
	var tamper atomic.Pointer[func(t *testing.T, m *mockoidc.MockOIDC, idToken string) string]
	m := tamperingIDP(t, &tamper)
	p := ssoPipeline(t, m)
	tests := []struct {
		name   string
		tamper func(t *testing.T, m *mockoidc.MockOIDC, idToken string) string
	}{
		{"unsigned (alg none)", func(t *testing.T, _ *mockoidc.MockOIDC, idToken string) string {
			parts := strings.Split(idToken, ".")
			header := base64.RawURLEncoding.EncodeToString([]byte(`{"alg":"none","typ":"JWT"}`))
			return header + "." + parts[1] + "."
		}},
		{"signed by another key", func(t *testing.T, _ *mockoidc.MockOIDC, idToken string) string {
			other, err := mockoidc.RandomKeypair(2048)
			if err != nil {
				t.Fatal(err)
			}
			claims := jwt.MapClaims{}
			if _, _, err := jwt.NewParser().ParseUnverified(idToken, claims); err != nil {
				t.Fatal(err)
			}
			signed, err := other.SignJWT(claims)
			if err != nil {
				t.Fatal(err)
			}
			return signed
		}},
		{"its payload forged after signing", func(t *testing.T, _ *mockoidc.MockOIDC, idToken string) string {
			parts := strings.Split(idToken, ".")
			payload, _ := base64.RawURLEncoding.DecodeString(parts[1])
			forged := strings.Replace(string(payload), `"sub":"00u7"`, `"sub":"00u-admin"`, 1)
			return parts[0] + "." + base64.RawURLEncoding.EncodeToString([]byte(forged)) + "." + parts[2]
		}},
		{"for another audience", func(t *testing.T, m *mockoidc.MockOIDC, idToken string) string {
			return resigned(t, m, idToken, func(c jwt.MapClaims) { c["aud"] = "another-client" })
		}},
		{"of another issuer", func(t *testing.T, m *mockoidc.MockOIDC, idToken string) string {
			return resigned(t, m, idToken, func(c jwt.MapClaims) { c["iss"] = "https://login.evil.example" })
		}},
		{"with another sign-in's nonce", func(t *testing.T, m *mockoidc.MockOIDC, idToken string) string {
			return resigned(t, m, idToken, func(c jwt.MapClaims) { c["nonce"] = "replayed-nonce" })
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tamper.Store(&tt.tamper)
			defer tamper.Store(nil)
			s := newSession(t, p)
			res := s.signInAs(m, person{subject: "00u7", email: "gu@acme.example", groups: []string{"purchasing-approvers"}})
			if res.status != http.StatusUnauthorized || !strings.Contains(res.body, "could not be verified") {
				t.Errorf("callback: %d, want 401 saying the answer could not be verified\n%s", res.status, res.body)
			}
			if page := s.get("/console/"); page.status != http.StatusSeeOther {
				t.Errorf("the overview after a refused sign-in: %d, want a redirect to sign in", page.status)
			}
		})
	}
	// The same provider, untampered, signs the person in: the refusals
	// above were the tokens', not the set-up's.
	s := newSession(t, p)
	if res := s.signInAs(m, person{subject: "00u7", email: "gu@acme.example", groups: []string{"purchasing-approvers"}}); res.status != http.StatusOK {
		t.Errorf("untampered sign-in: %d\n%s", res.status, res.body)
	}
}

// TestBrowserPersonSignsInWithTheIdentityProviderApprovesAndIsNamed drives
// headless chromium through the whole sign-in: the sign-in page's "Sign in
// with your organisation", the identity provider's redirect back, the page
// that hands over to the console (the SameSite=Strict session cookie must
// ride along), the approval; the timeline names the person.
func TestBrowserPersonSignsInWithTheIdentityProviderApprovesAndIsNamed(t *testing.T) {
	t.Parallel()
	m := newIDP(t)
	p := ssoPipeline(t, m)
	ctx := browser(t)
	op := propose(t, p, "po-browser-sso", `{"sku":"A-1","qty":5}`)
	p.Start(1)
	m.QueueUser(person{subject: "00u9hal", email: "hal@acme.example", name: "Hal Example", groups: []string{"purchasing-approvers"}})
	step(t, ctx, "sign in with the organisation",
		chromedp.Navigate(p.API.URL+"/console/signin"),
		chromedp.WaitVisible(chromedp.CSS("#sso button")),
		chromedp.Click(chromedp.CSS("#sso button")),
		chromedp.WaitVisible(chromedp.CSS("#overview")),
	)
	if got := text(t, ctx, "form.who span"); !strings.Contains(got, "Hal Example · approver") {
		t.Fatalf("the header names %q, want Hal Example · approver", got)
	}
	step(t, ctx, "approve",
		chromedp.Click(chromedp.CSS(`nav a[href="/console/approvals"]`)),
		chromedp.WaitVisible(chromedp.CSS("#op-"+op.ID.String())),
		chromedp.Click(chromedp.CSS("#op-"+op.ID.String()+" button.approve")),
		chromedp.WaitVisible(chromedp.CSS("p.notice")),
	)
	done := p.WaitStatus(op, ledger.StatusSucceeded, 30*time.Second)
	if n := p.Orders(done); n != 1 {
		t.Fatalf("the supplier holds %d orders, want exactly 1", n)
	}
	step(t, ctx, "open the timeline",
		chromedp.Navigate(p.API.URL+"/console/operations/"+op.ID.String()),
		chromedp.WaitVisible(chromedp.CSS("table.timeline")),
	)
	if got := text(t, ctx, "table.timeline tbody"); !strings.Contains(got, "person:hal@acme.example") {
		t.Errorf("the timeline does not name the person:\n%s", got)
	}
}

// TestRotatedIssuerKeysArePickedUpAndSignOutEndsAPersonsSession: after the
// identity provider signs with a new key (its key set then holds only the
// new one), the next sign-in verifies with it, without a restart; signing
// out ends the person's session on the server.
func TestRotatedIssuerKeysArePickedUpAndSignOutEndsAPersonsSession(t *testing.T) {
	t.Parallel()
	m := newIDP(t)
	p := ssoPipeline(t, m)
	ivy := person{subject: "00u8ivy", email: "ivy@acme.example", groups: []string{"purchasing-approvers"}}
	if res := newSession(t, p).signInAs(m, ivy); res.status != http.StatusOK {
		t.Fatalf("first sign-in: %d\n%s", res.status, res.body)
	}
	rotated, err := mockoidc.RandomKeypair(2048)
	if err != nil {
		t.Fatal(err)
	}
	m.Keypair = rotated
	s := newSession(t, p)
	if res := s.signInAs(m, ivy); res.status != http.StatusOK {
		t.Fatalf("sign-in after the key rotated: %d\n%s", res.status, res.body)
	}
	if page := s.get("/console/"); page.status != http.StatusOK {
		t.Fatalf("overview: %d", page.status)
	}
	var cookie string
	for _, c := range s.client.Jar.Cookies(mustURL(t, p.API.URL+"/console/")) {
		if c.Name == "actledger_console" {
			cookie = c.Value
		}
	}
	s.post("/console/signout", nil)
	// The copied cookie opens nothing once the person signed out.
	copied := newSession(t, p)
	copied.client.Jar.SetCookies(mustURL(t, p.API.URL+"/console/"), []*http.Cookie{{Name: "actledger_console", Value: cookie, Path: "/console/"}})
	if page := copied.get("/console/"); page.status != http.StatusSeeOther {
		t.Errorf("the signed-out session's cookie: %d, want a redirect to sign in", page.status)
	}
}

// TestAnUnverifiedEmailDoesNotNameThePerson: an ID token whose
// email_verified is false names the person by subject in the history, so
// that nobody is recorded as the owner of an address they only typed.
func TestAnUnverifiedEmailDoesNotNameThePerson(t *testing.T) {
	t.Parallel()
	m := newIDP(t)
	p := ssoPipeline(t, m)
	op := propose(t, p, "po-unverified", `{"sku":"A-1","qty":1}`)
	s := newSession(t, p)
	res := s.signInAs(m, person{subject: "00u10jo", email: "ceo@acme.example", groups: []string{"purchasing-approvers"}, unverified: true})
	if res.status != http.StatusOK {
		t.Fatalf("callback: %d\n%s", res.status, res.body)
	}
	page := s.get("/console/approvals")
	fp := fingerprintOn(t, page.body, op)
	if res := s.post("/console/approvals/"+op.ID.String()+"/approve", url.Values{"params_fingerprint": {fp}}); res.status != http.StatusSeeOther {
		t.Fatalf("approve: %d\n%s", res.status, res.body)
	}
	events, err := p.Store.Events(context.Background(), ledger.WholeTenant(p.TenantID), op.ID)
	if err != nil {
		t.Fatal(err)
	}
	var approvedBy string
	for _, e := range events {
		if e.Kind == ledger.EventApproved {
			approvedBy = e.Actor
		}
	}
	if approvedBy != "person:00u10jo" {
		t.Errorf("the approval names %q, want person:00u10jo (the subject: the email was not verified)", approvedBy)
	}
}

// TestSignInLogsNoCodeStateTokenOrSecret: the process's logs, at debug
// level, over a sign-in, a replayed callback and a refused token, hold
// none of the secrets that pass through: the authorization code, the
// state, the client secret, the session's and the pending sign-in's
// cookies.
func TestSignInLogsNoCodeStateTokenOrSecret(t *testing.T) {
	t.Parallel()
	var tamper atomic.Pointer[func(t *testing.T, m *mockoidc.MockOIDC, idToken string) string]
	m := tamperingIDP(t, &tamper)
	logs := &testpipeline.LogBuffer{}
	p := testpipeline.New(t, testpipeline.Options{
		Access: accessSection(m, "Acme Corp."),
		Env:    map[string]string{"OIDC_CLIENT_SECRET": m.ClientSecret},
		Logger: slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
	})
	var secrets []string
	s := newSession(t, p)
	m.QueueUser(person{subject: "00u11kim", email: "kim@acme.example", groups: []string{"purchasing-approvers"}})
	callback := s.authorize(s.startSignIn("/console/"))
	u := mustURL(t, callback)
	secrets = append(secrets, u.Query().Get("code"), u.Query().Get("state"), m.ClientSecret)
	for _, c := range s.client.Jar.Cookies(mustURL(t, p.API.URL+"/console/")) {
		secrets = append(secrets, c.Value)
	}
	if res := s.getURL(callback); res.status != http.StatusOK {
		t.Fatalf("callback: %d\n%s", res.status, res.body)
	}
	for _, c := range s.client.Jar.Cookies(mustURL(t, p.API.URL+"/console/")) {
		secrets = append(secrets, c.Value)
	}
	op := propose(t, p, "po-logged", `{"sku":"A-1","qty":1}`)
	fp := fingerprintOn(t, s.get("/console/approvals").body, op)
	if res := s.post("/console/approvals/"+op.ID.String()+"/approve", url.Values{"params_fingerprint": {fp}}); res.status != http.StatusSeeOther {
		t.Fatalf("approve: %d\n%s", res.status, res.body)
	}
	s.getURL(callback) // replayed
	forged := func(t *testing.T, m *mockoidc.MockOIDC, idToken string) string {
		return resigned(t, m, idToken, func(c jwt.MapClaims) { c["aud"] = "another-client" })
	}
	tamper.Store(&forged)
	other := newSession(t, p)
	m.QueueUser(person{subject: "00u11kim", email: "kim@acme.example", groups: []string{"purchasing-approvers"}})
	refused := other.authorize(other.startSignIn("/console/"))
	ru := mustURL(t, refused)
	secrets = append(secrets, ru.Query().Get("code"), ru.Query().Get("state"))
	other.getURL(refused)
	got := logs.String()
	if !strings.Contains(got, "console signed in") || !strings.Contains(got, "did not verify") {
		t.Fatalf("the logs do not tell the sign-in and the refusal:\n%s", got)
	}
	if !regexp.MustCompile(`msg="proposal approved".* by=person:kim@acme.example`).MatchString(got) {
		t.Errorf("the approval's log line does not name the person who approved:\n%s", got)
	}
	for _, secret := range secrets {
		if secret != "" && strings.Contains(got, secret) {
			t.Errorf("the logs hold a secret %q:\n%s", secret, got)
		}
	}
}
