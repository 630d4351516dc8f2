package console

import (
	"bytes"
	"cmp"
	"context"
	"embed"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"html/template"
	"io/fs"
	"log/slog"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/actledger/actledger/api"
	"github.com/actledger/actledger/auth"
	"github.com/actledger/actledger/ledger"
	"github.com/actledger/actledger/reconciler"
	"github.com/actledger/actledger/sso"
)

// Page sizes of the console's lists.
const (
	// DefaultPageSize is a list's length when the address gives none.
	DefaultPageSize = 50
	// MaxPageSize is the longest list a page shows.
	MaxPageSize = 200
)

// DefaultRequestTimeout is Config.RequestTimeout's default.
const DefaultRequestTimeout = 10 * time.Second

// maxForm bounds a console form's body: notes and reasons are at most a
// few kilobytes, and a batch names at most MaxPageSize items.
const maxForm = 64 << 10

// sessionCookie holds the id of the signed-in browser's session
// (auth.Tokens.StartSession), never the token: a copied cookie is worth
// nothing once the person signs out, the session expires or the token is
// revoked. It is a session cookie (no Max-Age: the browser forgets it when
// it closes), HttpOnly (no script reads it), SameSite=Strict (no other
// site's page sends it), and over TLS (also behind a proxy that ends TLS,
// see overTLS) Secure and named with the __Host- prefix (cookieFor).
const sessionCookie = "actledger_console"

//go:embed templates/*.html
var templateFS embed.FS

//go:embed static/console.css
var staticFS embed.FS

// Config configures a Console. Zero values mean the documented defaults.
type Config struct {
	// API, Ledger and Tokens are required: the console acts through the
	// API's functions, reads the ledger, and verifies every request's
	// token.
	API    *api.Server
	Ledger *ledger.Store
	Tokens *auth.Tokens
	// Reconciler lists the review queue; nil answers the review pages
	// 404, as the API does.
	Reconciler *reconciler.Reconciler
	// RequestTimeout bounds the work of one request. Default
	// DefaultRequestTimeout.
	RequestTimeout time.Duration
	// SignIn, when set, offers sign-in with the organisation's identity
	// provider beside the token form (the providers file's access:
	// section); nil: tokens only.
	SignIn *sso.SignIn
	// SessionLifetime is how long a sign-in lasts at most, kept by the
	// server (the cookie itself has no lifetime). Default
	// auth.DefaultSessionLifetime.
	SessionLifetime time.Duration
	Logger          *slog.Logger
}

// Console is the web console. It is an http.Handler for the paths under
// /console/.
type Console struct {
	cfg     Config
	log     *slog.Logger
	pages   map[string]*template.Template
	handler http.Handler
}

// New returns a Console, or an error naming the first required field that
// is missing.
func New(cfg Config) (*Console, error) {
	switch {
	case cfg.API == nil:
		return nil, errors.New("console: Config.API is required")
	case cfg.Ledger == nil:
		return nil, errors.New("console: Config.Ledger is required")
	case cfg.Tokens == nil:
		return nil, errors.New("console: Config.Tokens is required")
	case cfg.RequestTimeout < 0:
		return nil, fmt.Errorf("console: Config.RequestTimeout %s must not be negative", cfg.RequestTimeout)
	case cfg.SessionLifetime < 0:
		return nil, fmt.Errorf("console: Config.SessionLifetime %s must not be negative", cfg.SessionLifetime)
	}
	cfg.RequestTimeout = cmp.Or(cfg.RequestTimeout, DefaultRequestTimeout)
	cfg.SessionLifetime = cmp.Or(cfg.SessionLifetime, auth.DefaultSessionLifetime)
	pages, err := parsePages()
	if err != nil {
		return nil, err
	}
	c := &Console{cfg: cfg, log: cmp.Or(cfg.Logger, slog.Default()).With("component", "console"), pages: pages}
	mux := http.NewServeMux()
	c.routes(mux)
	c.handler = secureHeaders(c.sameOrigin(mux))
	return c, nil
}

// errForeignReferer: a state-changing request whose only word on its
// origin is a Referer of another host.
var errForeignReferer = errors.New("console: the request's Referer names another site")

// sameOrigin refuses, on every route (sign-in included), a state-changing
// request that another origin may have sent: http.CrossOriginProtection
// judges Sec-Fetch-Site, else Origin against Host; a request with neither
// is refused when its Referer names another host. A request that names no
// origin at all is let through, as CrossOriginProtection does: every
// browser sends Sec-Fetch-Site or Origin with a form it posts across
// sites, so such a request is a script's (curl and the like), which holds
// the cookie of its own accord and cannot be a forged one.
func (c *Console) sameOrigin(next http.Handler) http.Handler {
	cop := http.NewCrossOriginProtection()
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if err := checkOrigin(cop, r); err != nil {
			c.log.WarnContext(r.Context(), "cross-origin request refused", "method", r.Method, "path", r.URL.Path, "err", err)
			c.render(w, r, http.StatusForbidden, "error", view{Title: "Refused", Error: "This request came from another site and was refused; nothing changed."})
			return
		}
		next.ServeHTTP(w, r)
	})
}

// checkOrigin is sameOrigin's rule: nil lets r through.
func checkOrigin(cop *http.CrossOriginProtection, r *http.Request) error {
	if err := cop.Check(r); err != nil {
		return err
	}
	switch r.Method {
	case http.MethodGet, http.MethodHead, http.MethodOptions:
		return nil
	}
	if r.Header.Get("Sec-Fetch-Site") != "" || r.Header.Get("Origin") != "" || r.Referer() == "" {
		return nil // judged by cop
	}
	if ref, err := url.Parse(r.Referer()); err == nil && ref.Host == r.Host {
		return nil
	}
	return errForeignReferer
}

// ServeHTTP implements http.Handler.
func (c *Console) ServeHTTP(w http.ResponseWriter, r *http.Request) { c.handler.ServeHTTP(w, r) }

// route is one page or action of the console: the table registers the
// handlers and writes docs/console.md, so the list people read is the
// list that runs.
type route struct {
	Method, Path string
	// Roles may use it; none: anyone (signing in and out).
	Roles []auth.Role
	// Calls names the function the JSON API calls too.
	Calls string
	Does  string
	page  pageHandler
	open  http.HandlerFunc
}

// table is every route of the console.
func (c *Console) table() []route {
	approver, operator := auth.RoleApprover, auth.RoleOperator
	return []route{
		{Method: "GET", Path: "/console/signin", Does: "the sign-in form: paste an approver or operator token", open: c.signInPage},
		{Method: "POST", Path: "/console/signin", Calls: "auth.Tokens.Authenticate, auth.Tokens.StartSession", Does: "checks the token (agent tokens refused) and starts a server-side session; the cookie holds the session's id, never the token", open: c.signIn},
		{Method: "POST", Path: "/console/signin/oidc", Calls: "sso.SignIn.Begin", Does: "with an access: section: sends the browser to the organisation's identity provider (authorization code with PKCE, a state and a nonce), keeping a pending-sign-in cookie for the way back", open: c.ssoStart},
		{Method: "GET", Path: "/console/oidc/callback", Calls: "sso.SignIn.Finish, auth.Tokens.StartPersonSession", Does: "the identity provider's redirect back: the state must be this browser's and unused, the ID token verified, and a people rule must admit the person; then a server-side session of the person starts", open: c.ssoCallback},
		{Method: "POST", Path: "/console/signout", Calls: "auth.Tokens.EndSession", Does: "ends the session on the server and clears the cookie", open: c.signOut},
		{Method: "GET", Path: "/console/{$}", Roles: []auth.Role{approver, operator}, Calls: "ledger.Store.OperationCounts, api.Server.ApprovalRequests, reconciler.Reconciler.ReviewPage, api.Server.Circuits, ledger.Store.NotificationFailures",
			Does: "the overview, where a sign-in lands: operations by state (the counts the ledger keeps, never a count of its rows), the oldest proposal waiting, the oldest review item and its owner, open circuits, notification receivers that gave up an event in the last day", page: c.overview},
		{Method: "GET", Path: "/console/operations", Roles: []auth.Role{approver, operator}, Calls: "ledger.Store.OperationsPage",
			Does: "operations newest first, filtered by key, client key, state, action, provider and time range, paged as GET /v1/operations; each links to its timeline", page: c.operations},
		{Method: "GET", Path: "/console/approvals", Roles: []auth.Role{approver}, Calls: "api.Server.ApprovalRequests",
			Does: "open proposals oldest first: params in full, fingerprint, requested by, age, expiry", page: c.approvals},
		{Method: "POST", Path: "/console/approvals/{id}/approve", Roles: []auth.Role{approver}, Calls: "api.Server.ApproveProposal",
			Does: "approves with the fingerprint the page showed (params_fingerprint, note)", page: c.approve},
		{Method: "POST", Path: "/console/approvals/{id}/deny", Roles: []auth.Role{approver}, Calls: "api.Server.DenyProposal",
			Does: "denies with a reason", page: c.deny},
		{Method: "GET", Path: "/console/operations/{id}", Roles: []auth.Role{approver, operator}, Calls: "ledger.Store.Get, ledger.Store.EventsPage",
			Does: "summary, state, timeline of events and attempts, evidence, compensation links, trace id (with tracing on)", page: c.operation},
		{Method: "GET", Path: "/console/review", Roles: []auth.Role{operator}, Calls: "reconciler.Reconciler.ReviewPage",
			Does: "open review items, filtered by reason and owner", page: c.review},
		{Method: "POST", Path: "/console/review", Roles: []auth.Role{operator},
			Calls: "api.Server.ResolveOperation, api.Server.RetryOperation, api.Server.ResolveEvidence",
			Does:  "resolves (succeeded with reference, failed, cancelled) or retries the selected items, with a note; one result per item", page: c.act},
		{Method: "GET", Path: "/console/dispatch", Roles: []auth.Role{operator}, Calls: "api.Server.DispatchState",
			Does: "pauses with who and when, calls in flight with their age", page: c.dispatch},
		{Method: "POST", Path: "/console/dispatch/pause", Roles: []auth.Role{operator}, Calls: "api.Server.PauseDispatch",
			Does: "pauses a provider, an action, or both (empty: any)", page: c.pause},
		{Method: "POST", Path: "/console/dispatch/resume", Roles: []auth.Role{operator}, Calls: "api.Server.ResumeDispatch",
			Does: "removes the pauses within a provider and action", page: c.resume},
	}
}

func (c *Console) routes(mux *http.ServeMux) {
	static, _ := fs.Sub(staticFS, "static")
	mux.Handle("GET /console/static/", http.StripPrefix("/console/static/", http.FileServerFS(static)))
	for _, rt := range c.table() {
		pattern := rt.Method + " " + rt.Path
		if rt.page != nil {
			mux.Handle(pattern, c.guard(rt.page, rt.Roles...))
			continue
		}
		mux.HandleFunc(pattern, rt.open)
	}
	mux.HandleFunc("/console/", func(w http.ResponseWriter, r *http.Request) {
		c.render(w, r, http.StatusNotFound, "error", view{Title: "Not found", Error: notFoundText})
	})
}

// RoutesMarkdown is docs/console.md: every page and action of the
// console, who may use it and the function it shares with the JSON API.
func RoutesMarkdown() string {
	var b strings.Builder
	b.WriteString("# Console pages and actions\n\n")
	b.WriteString("Generated from the console's route table (`console.RoutesMarkdown`); `go test ./console -run RoutesDoc -update`\n")
	b.WriteString("rewrites it. Every POST is refused from another origin (`http.CrossOriginProtection`: Sec-Fetch-Site,\n")
	b.WriteString("else Origin against Host, else a Referer of another host). A page for roles asks a signed-out browser\n")
	b.WriteString("to sign in and answers another role `403`.\n\n")
	b.WriteString("| Method | Path | Roles | Calls (as the JSON API does) | Does |\n|---|---|---|---|---|\n")
	for _, rt := range (*Console)(nil).table() {
		roles := make([]string, len(rt.Roles))
		for i, r := range rt.Roles {
			roles[i] = string(r)
		}
		fmt.Fprintf(&b, "| %s | `%s` | %s | %s | %s |\n", rt.Method, rt.Path, cmp.Or(strings.Join(roles, ", "), "anyone"),
			cmp.Or(rt.Calls, "—"), rt.Does)
	}
	return b.String()
}

// notFoundText is the one answer for a missing object and another
// tenant's.
const notFoundText = "There is nothing here: no such page or object."

// secureHeaders keeps pages out of caches and frames and allows only the
// console's own stylesheet: no script runs on a console page.
func secureHeaders(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Content-Security-Policy", contentSecurityPolicy("'self'"))
		h.Set("X-Content-Type-Options", "nosniff")
		// same-origin, not no-referrer: under no-referrer a browser sends
		// "Origin: null" with the console's own forms, and one without
		// Sec-Fetch-Site would then be refused; other sites still learn
		// nothing.
		h.Set("Referrer-Policy", "same-origin")
		h.Set("Cache-Control", "no-store")
		next.ServeHTTP(w, r)
	})
}

// contentSecurityPolicy is the console's policy with forms allowed to
// post to formAction: its own origin, and on the sign-in page the
// identity provider's too (the sign-in form's answer redirects there,
// and a browser holds a form's redirects to form-action).
func contentSecurityPolicy(formAction string) string {
	return "default-src 'none'; style-src 'self'; img-src 'self'; form-action " + formAction + "; frame-ancestors 'none'; base-uri 'none'"
}

// pageHandler is a handler that runs for a signed-in person.
type pageHandler func(w http.ResponseWriter, r *http.Request, p auth.Principal)

// errSignedOut: the request carries no usable token.
var errSignedOut = errors.New("console: not signed in")

// principal looks the request's session up with the ledger on every
// request, so an ended session, an expired one and one of a revoked token
// stop working at once.
func (c *Console) principal(r *http.Request) (auth.Principal, error) {
	ck, err := r.Cookie(cookieName(r, sessionCookie))
	if err != nil || ck.Value == "" {
		return auth.Principal{}, errSignedOut
	}
	p, err := c.cfg.Tokens.Session(r.Context(), ck.Value)
	if errors.Is(err, auth.ErrUnauthenticated) {
		return auth.Principal{}, errSignedOut
	}
	return p, err
}

// guard runs h for a signed-in person of one of roles: without a usable
// token a page asks to sign in, with another role it answers 403.
func (c *Console) guard(h pageHandler, roles ...auth.Role) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx, cancel := context.WithTimeout(r.Context(), c.cfg.RequestTimeout)
		defer cancel()
		r = r.WithContext(ctx)
		p, err := c.principal(r)
		switch {
		case errors.Is(err, errSignedOut):
			clearSession(w, r)
			if r.Method == http.MethodGet {
				http.Redirect(w, r, "/console/signin", http.StatusSeeOther)
				return
			}
			c.render(w, r, http.StatusUnauthorized, "signin", view{Title: "Sign in",
				Error: "Your sign-in is missing or no longer valid (the token may have been revoked); nothing changed. Sign in again."})
			return
		case err != nil:
			c.fail(w, r, nil, err)
			return
		}
		if p.Person != nil {
			// The events of this request's decisions hold who the
			// person is (ledger.WithPerson).
			r = r.WithContext(ledger.WithPerson(r.Context(), p.Person))
		}
		for _, role := range roles {
			if p.Role == role {
				h(w, r, p)
				return
			}
		}
		c.render(w, r, http.StatusForbidden, "error", view{P: &p, Title: "Not for this role",
			Error: fmt.Sprintf("Tokens of role %s may not use this page.", p.Role)})
	})
}

func (c *Console) signInPage(w http.ResponseWriter, r *http.Request) {
	c.render(w, r, http.StatusOK, "signin", view{Title: "Sign in"})
}

// signIn checks the pasted token with the ledger and starts a session of
// it, whose id the cookie keeps. Agent and metrics tokens are refused: the
// console is for people.
func (c *Console) signIn(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), c.cfg.RequestTimeout)
	defer cancel()
	r = r.WithContext(ctx)
	r.Body = http.MaxBytesReader(w, r.Body, maxForm)
	secret := r.PostFormValue("token")
	p, err := c.cfg.Tokens.Authenticate(ctx, secret)
	switch {
	case errors.Is(err, auth.ErrUnauthenticated):
		c.render(w, r, http.StatusUnauthorized, "signin", view{Title: "Sign in", Error: "That token is not valid, or it was revoked."})
		return
	case err != nil:
		c.fail(w, r, nil, err)
		return
	case p.Role != auth.RoleApprover && p.Role != auth.RoleOperator:
		c.log.WarnContext(ctx, "console sign-in refused", "tenant", p.Tenant, "role", p.Role, "token", p.Name)
		who := "An agent token"
		if p.Role == auth.RoleMetrics {
			who = "A metrics token"
		}
		c.render(w, r, http.StatusForbidden, "signin", view{Title: "Sign in",
			Error: who + " cannot sign in here: the console is for approvers and operators."})
		return
	}
	session, err := c.cfg.Tokens.StartSession(ctx, p, c.cfg.SessionLifetime)
	if err != nil {
		c.fail(w, r, nil, err)
		return
	}
	setSession(w, r, session)
	c.log.InfoContext(ctx, "console signed in", "tenant", p.Tenant, "role", p.Role, "token", p.Name)
	http.Redirect(w, r, "/console/", http.StatusSeeOther)
}

// signOut ends the session on the server, so the cookie is worth nothing
// even where the browser keeps a copy, then asks the browser to forget it.
func (c *Console) signOut(w http.ResponseWriter, r *http.Request) {
	if ck, err := r.Cookie(cookieName(r, sessionCookie)); err == nil && ck.Value != "" {
		ctx, cancel := context.WithTimeout(r.Context(), c.cfg.RequestTimeout)
		defer cancel()
		if err := c.cfg.Tokens.EndSession(ctx, ck.Value); err != nil {
			c.fail(w, r, nil, err)
			return
		}
	}
	clearSession(w, r)
	http.Redirect(w, r, "/console/signin", http.StatusSeeOther)
}

// setSession gives the browser the session's cookie (sessionCookie).
func setSession(w http.ResponseWriter, r *http.Request, session string) {
	http.SetCookie(w, cookieFor(r, sessionCookie, session, 0, http.SameSiteStrictMode))
}

func clearSession(w http.ResponseWriter, r *http.Request) {
	http.SetCookie(w, cookieFor(r, sessionCookie, "", -1, http.SameSiteStrictMode))
}

// hostPrefix marks a cookie the browser accepts only when it is Secure,
// has Path=/ and no Domain (RFC 6265bis §4.1.3.2): no other host of the
// domain (a sibling subdomain, a plain-HTTP page) can set one, so nobody
// can plant a session of their own in a person's browser.
const hostPrefix = "__Host-"

// cookieName is the console cookie's name for r: over TLS with the
// __Host- prefix, and only that name is read there, so a cookie without
// it, which any sibling host could have set, is not. Over plain HTTP
// (a console on a developer's machine) a browser refuses Secure and so
// __Host- cookies, and the bare name is kept.
func cookieName(r *http.Request, base string) string {
	if overTLS(r) {
		return hostPrefix + base
	}
	return base
}

// cookieFor is a console cookie: HttpOnly, with the site rule sameSite,
// maxAge as http.Cookie has it (0: a session cookie, -1: forget it).
// Over TLS it is Secure, __Host- and scoped to the whole host, as the
// prefix requires (the API answers bearer tokens only, never a cookie);
// over plain HTTP it is scoped to the console's path.
func cookieFor(r *http.Request, base, value string, maxAge int, sameSite http.SameSite) *http.Cookie {
	path := "/console/"
	if overTLS(r) {
		path = "/"
	}
	return &http.Cookie{Name: cookieName(r, base), Value: value, Path: path, MaxAge: maxAge,
		HttpOnly: true, SameSite: sameSite, Secure: overTLS(r)}
}

// overTLS says whether the browser reached the console over TLS: directly,
// or through a proxy that ended TLS and says so with X-Forwarded-Proto.
// It only decides the cookie's Secure attribute, so a client that claims
// https over plain HTTP harms no one but itself: its browser will not send
// the cookie back.
func overTLS(r *http.Request) bool {
	return r.TLS != nil || strings.EqualFold(r.Header.Get("X-Forwarded-Proto"), "https")
}

// view is what every page template gets.
type view struct {
	P     *auth.Principal
	Title string
	// Nav names the current section ("overview", "operations",
	// "approvals", "review", "dispatch").
	Nav    string
	Notice string
	Error  string
	Data   any
	// Next is the address of the next page of a list; empty on the last.
	Next string
	// SSO is the identity provider's issuer when people may sign in with
	// it (render sets it).
	SSO string
}

// render executes page into a buffer first, so a template error never
// sends half a page.
func (c *Console) render(w http.ResponseWriter, r *http.Request, status int, page string, v view) {
	start := time.Now()
	if c.cfg.SignIn != nil {
		v.SSO = c.cfg.SignIn.Issuer()
		if page == "signin" {
			w.Header().Set("Content-Security-Policy", contentSecurityPolicy("'self' "+c.cfg.SignIn.Origin()))
		}
	}
	var buf bytes.Buffer
	if err := c.pages[page].ExecuteTemplate(&buf, "layout", v); err != nil {
		c.log.ErrorContext(r.Context(), "console page failed", "page", page, "err", err)
		http.Error(w, "internal error", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(status)
	_, _ = w.Write(buf.Bytes())
	c.log.DebugContext(r.Context(), "console page rendered", "page", page, "status", status, "render", time.Since(start))
}

// fail shows err in the API's words with the API's status; p is nil when
// nobody is signed in.
func (c *Console) fail(w http.ResponseWriter, r *http.Request, p *auth.Principal, err error) {
	e := api.ErrorOf(err)
	if e.Status >= 500 {
		c.log.ErrorContext(r.Context(), "console request failed", "method", r.Method, "path", r.URL.Path, "status", e.Status, "err", err)
	}
	msg := e.Message
	if e.Status == http.StatusNotFound {
		msg = notFoundText
	}
	c.render(w, r, e.Status, "error", view{P: p, Title: http.StatusText(e.Status), Error: msg})
}

// problem is the text a person reads for err: the API's code and message.
func problem(err error) string {
	e := api.ErrorOf(err)
	if e.Status == http.StatusNotFound {
		return notFoundText
	}
	return e.Message + " (" + e.Code + ")"
}

// pageSize reads ?limit=, bounded; a bad value means the default.
func pageSize(r *http.Request) int {
	n, err := strconv.Atoi(r.URL.Query().Get("limit"))
	if err != nil || n < 1 {
		return DefaultPageSize
	}
	return min(n, MaxPageSize)
}

// cursor is a list position in an address: opaque, bound to its list.
type cursor struct {
	List     string          `json:"l"`
	Position json.RawMessage `json:"p"`
}

func encodeCursor(list string, position any) string {
	p, _ := json.Marshal(position)
	b, _ := json.Marshal(cursor{List: list, Position: p})
	return base64.RawURLEncoding.EncodeToString(b)
}

// decodeCursor reads ?cursor= of list into position; false when there is
// none or it is not one of this list's (the list then starts over).
func decodeCursor(r *http.Request, list string, position any) bool {
	raw, err := base64.RawURLEncoding.DecodeString(r.URL.Query().Get("cursor"))
	if err != nil || len(raw) == 0 {
		return false
	}
	var cur cursor
	return json.Unmarshal(raw, &cur) == nil && cur.List == list && json.Unmarshal(cur.Position, position) == nil
}

func itoa(n int) string { return strconv.Itoa(n) }
