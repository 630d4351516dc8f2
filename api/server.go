package api

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp"
	"go.opentelemetry.io/otel/trace"

	"github.com/actledger/actledger/auth"
	"github.com/actledger/actledger/ledger"
	"github.com/actledger/actledger/metrics"
	"github.com/actledger/actledger/provider"
	"github.com/actledger/actledger/reconciler"
	"github.com/actledger/actledger/statement"
	"github.com/actledger/actledger/tracing"
)

// DefaultRequestTimeout is Config.RequestTimeout's default.
const DefaultRequestTimeout = 10 * time.Second

// Config configures a Server. Zero values mean the documented defaults.
type Config struct {
	// Ledger and Tokens are required.
	Ledger *ledger.Store
	Tokens *auth.Tokens
	// Registry is the providers config: the actions, each one's provider
	// and contract (params schema, approval policy), and each provider's
	// account and environment. Required, and the API's only source of
	// them (New derives the rest), so what the API accepts and binds
	// approvals to is what the dispatchers built from the same registry
	// call. An action not in it answers 422.
	Registry *provider.Registry
	// OnApprovalDecision, when set, is told of every decided approval
	// request (for metrics).
	OnApprovalDecision func(outcome metrics.ApprovalOutcome)
	// ReadyChecks are the backing services /readyz asks, each under its
	// name ("postgres", "nats"). None means always ready.
	ReadyChecks []ReadyCheck
	// WebhookSecrets returns the secrets that may sign provider's
	// webhooks (several during a rotation); ok is false for a provider that
	// is not configured (404).
	WebhookSecrets func(provider string) (secrets [][]byte, ok bool)
	// OnWebhookRejected, when set, is told of every webhook whose
	// signature failed (for metrics); reason is a fixed word.
	OnWebhookRejected func(provider, reason string)
	// Statements runs providers' statements for POST /v1/reconciliations;
	// nil answers it 404.
	Statements *statement.Runner
	// Reconciler serves the operator's review endpoints; nil answers them
	// 404.
	Reconciler *reconciler.Reconciler
	// MCP, when set, serves POST /mcp (package mcp's Handler) to agent
	// tokens; the route authenticates first, like every route, and gives
	// the request MCPBudget beyond RequestTimeout for get_operation's
	// waits. Nil: no /mcp.
	MCP http.Handler
	// MCPAllowedOrigins are the origins ("https://agents.example.com",
	// scheme://host[:port]) whose browser pages may POST /mcp besides the
	// server's own (an Origin naming the request's Host). A request with
	// another Origin is refused with 403 before its token is looked at, as
	// MCP's streamable HTTP transport requires against DNS rebinding; one
	// without an Origin (not a browser) is let through. New refuses an
	// entry that is not an origin.
	MCPAllowedOrigins []string
	// MCPAllowedHosts are the host names ("agents.example.com", an IPv4
	// address or a bracketed IPv6 one; any port) a POST /mcp may name in
	// its Host besides the loopback ones (localhost, 127.0.0.0/8, [::1]).
	// A request that arrived on a loopback address is refused with 403
	// when its Host is another, against DNS rebinding; when hosts are
	// listed, every POST /mcp is held to them. New refuses an entry
	// ParseMCPHost does not read.
	MCPAllowedHosts []string
	// Watcher wakes GET /v1/operations/{id}?wait= when the operation
	// changes (ledger.Watcher, started by the caller). Without one a wait
	// is answered when it runs out.
	Watcher OperationWatcher
	// Metrics serves GET /metrics to tokens of role metrics; nil serves
	// nothing there.
	Metrics http.Handler
	// MaxBody is the request body limit. Default DefaultMaxBody.
	MaxBody int64
	// RequestTimeout bounds the work of one request, so an outage answers
	// 503 instead of hanging. Default DefaultRequestTimeout.
	RequestTimeout time.Duration
	Logger         *slog.Logger
	// TracerProvider, when set, gives every API route but the probes and
	// /metrics an OpenTelemetry server span (see Server.traced). Nil: no
	// spans, and no cost.
	TracerProvider trace.TracerProvider
}

// actionsOf maps each action of a registry to the name of its provider.
func actionsOf(reg *provider.Registry) map[string]string {
	out := make(map[string]string)
	for _, action := range reg.Actions() {
		pc, _ := reg.ForAction(action)
		out[action] = pc.Name
	}
	return out
}

// targetsOf maps each provider of a registry to its account and
// environment as its config names them.
func targetsOf(reg *provider.Registry) map[string]ledger.Target {
	providers := reg.Providers()
	out := make(map[string]ledger.Target, len(providers))
	for _, pc := range providers {
		out[pc.Name] = ledger.Target{Account: pc.Account, Environment: pc.Environment}
	}
	return out
}

// Server is the HTTP API. It is an http.Handler.
type Server struct {
	cfg Config
	// actions maps each configured action to its provider (an action not
	// in it answers 422), and targets each provider to its account and
	// environment: every approval is bound to its action's target as it
	// is granted, and an operation whose action later points elsewhere
	// is held before any call. Both are read from Config.Registry once,
	// by New.
	actions map[string]string
	targets map[string]ledger.Target
	log     *slog.Logger
	mux     *http.ServeMux
	// mcpOrigins judges the Origin of POST /mcp (Config.MCPAllowedOrigins).
	mcpOrigins *http.CrossOriginProtection
	// mcpHosts judges the Host of POST /mcp (Config.MCPAllowedHosts).
	mcpHosts mcpHostRule
	// draining is closed by Drain: long polls stop waiting.
	draining  chan struct{}
	drainOnce sync.Once
}

// Drain makes every long poll in progress, and every later one, answer at
// once (304 when nothing changed), so a shutdown is not held for their
// waits. Register it with http.Server.RegisterOnShutdown.
func (s *Server) Drain() {
	s.drainOnce.Do(func() { close(s.draining) })
}

// New returns a Server, or an error naming the first required field
// that is missing or the first unusable value.
func New(cfg Config) (*Server, error) {
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	if _, err := openAPIJSON(); err != nil {
		return nil, err
	}
	origins, err := mcpOriginRule(cfg.MCPAllowedOrigins)
	if err != nil {
		return nil, err
	}
	hosts, err := newMCPHostRule(cfg.MCPAllowedHosts)
	if err != nil {
		return nil, err
	}
	s := &Server{cfg: cfg, actions: actionsOf(cfg.Registry), targets: targetsOf(cfg.Registry), mcpOrigins: origins, mcpHosts: hosts,
		log: cmp.Or(cfg.Logger, slog.Default()).With("component", "api"), mux: http.NewServeMux(), draining: make(chan struct{})}
	s.routes()
	return s, nil
}

// withDefaults fills the zero fields with the defaults.
func (cfg Config) withDefaults() Config {
	cfg.MaxBody = cmp.Or(cfg.MaxBody, DefaultMaxBody)
	cfg.RequestTimeout = cmp.Or(cfg.RequestTimeout, DefaultRequestTimeout)
	return cfg
}

// validate reports the first unusable field of a config with defaults
// applied, by name.
func (cfg Config) validate() error {
	switch {
	case cfg.Ledger == nil:
		return errors.New("api: Config.Ledger is required")
	case cfg.Tokens == nil:
		return errors.New("api: Config.Tokens is required")
	case cfg.Registry == nil:
		return errors.New("api: Config.Registry is required")
	case cfg.MaxBody <= 0:
		return fmt.Errorf("api: Config.MaxBody %d must be positive", cfg.MaxBody)
	case cfg.RequestTimeout <= 0:
		return fmt.Errorf("api: Config.RequestTimeout %s must be positive", cfg.RequestTimeout)
	}
	return nil
}

// route is one line of the API's route table. The mux is built from the
// table and nothing else, and the OpenAPI tests read the same table, so a
// route added here and not described in openapi.yaml (or described there
// and not added here) fails them.
type route struct {
	// pattern is the http.ServeMux pattern: "METHOD /path".
	pattern string
	// roles may call the route, with their bearer token. None: the route
	// takes no token (health, the document; webhooks are signed).
	roles []auth.Role
	// authed serves a route with roles; plain one without.
	authed authedHandler
	plain  http.Handler
	// budget, when set, lets a request take longer than
	// Config.RequestTimeout by what it says of the request (a long poll's
	// wait); see authed.
	budget func(*http.Request) time.Duration
	// before, when set, is a check of the transport that runs before the
	// token is looked at (the Host and Origin rules of POST /mcp).
	before func(http.Handler) http.Handler
	// off leaves the route off the mux, because what serves it is not
	// configured; it answers 404 like any unknown path. The document
	// still describes it.
	off bool
	// undocumented says why the route is not in openapi.yaml (an HTML
	// page on the API's mux; none today: the console is mounted beside the
	// API by package app); empty for every API route.
	undocumented string
}

// Route describes one route of the API, for tools and tests (package
// openapitest reads it).
type Route struct {
	// Pattern is the http.ServeMux pattern: "METHOD /path".
	Pattern string
	// Roles may call the route with their bearer token; none: it takes no
	// token.
	Roles []auth.Role
	// Undocumented says why the route is not in openapi.yaml; empty for
	// every API route.
	Undocumented string
}

// Routes lists every route a Server may serve, whatever its Config turns
// on, in the route table's order.
func Routes() []Route {
	table := (&Server{}).routeTable()
	out := make([]Route, len(table))
	for i, rt := range table {
		out[i] = Route{Pattern: rt.pattern, Roles: rt.roles, Undocumented: rt.undocumented}
	}
	return out
}

// Who may call a route.
var (
	agents    = []auth.Role{auth.RoleAgent}
	approvers = []auth.Role{auth.RoleApprover}
	operators = []auth.Role{auth.RoleOperator}
	// scrapers read the metrics, which count every tenant's work: no
	// tenant's agent, approver or operator may.
	scrapers = []auth.Role{auth.RoleMetrics}
	anyRole  = []auth.Role{auth.RoleAgent, auth.RoleOperator, auth.RoleApprover}
)

// routeTable is every route of the API, one line each.
func (s *Server) routeTable() []route {
	noReview := s.cfg.Reconciler == nil
	return []route{
		{pattern: "GET /healthz", plain: http.HandlerFunc(healthz)},
		{pattern: "GET /readyz", plain: http.HandlerFunc(s.readyz)},
		{pattern: "GET /metrics", roles: scrapers, authed: s.serveMetrics, off: s.cfg.Metrics == nil},
		{pattern: "GET /openapi.json", plain: http.HandlerFunc(serveOpenAPI)},
		{pattern: "POST /v1/approvals", roles: approvers, authed: s.createApproval},
		{pattern: "POST /v1/approvals/{id}/revoke", roles: approvers, authed: s.revokeApproval},
		{pattern: "POST /v1/operations", roles: agents, authed: s.createOperation},
		{pattern: "GET /v1/operations", roles: anyRole, authed: s.findOperation},
		{pattern: "GET /v1/operations/{id}", roles: anyRole, authed: s.getOperation, budget: waitBudget},
		{pattern: "GET /v1/operations/{id}/events", roles: anyRole, authed: s.operationEvents},
		{pattern: "GET /v1/actions", roles: anyRole, authed: s.listActions},
		{pattern: "GET /v1/approval-requests", roles: approvers, authed: s.listApprovalRequests},
		{pattern: "POST /v1/operations/{id}/approve", roles: approvers, authed: s.approveOperation},
		{pattern: "POST /v1/operations/{id}/deny", roles: approvers, authed: s.denyOperation},
		{pattern: "POST /v1/dispatch/pause", roles: operators, authed: s.pauseDispatch},
		{pattern: "POST /v1/dispatch/resume", roles: operators, authed: s.resumeDispatch},
		{pattern: "GET /v1/dispatch", roles: operators, authed: s.dispatchStatus},
		{pattern: "GET /v1/reconciliations", roles: operators, authed: s.listReconciliations},
		{pattern: "POST /v1/reconciliations", roles: operators, authed: s.runReconciliation, off: s.cfg.Statements == nil},
		{pattern: "POST /v1/webhooks/{provider}", plain: http.HandlerFunc(s.webhook)},
		{pattern: "POST /mcp", roles: agents, authed: s.serveMCP, budget: mcpBudget, before: s.mcpTransport, off: s.cfg.MCP == nil},
		{pattern: "GET /mcp", plain: http.HandlerFunc(s.mcpPostOnly), off: s.cfg.MCP == nil},
		{pattern: "DELETE /mcp", plain: http.HandlerFunc(s.mcpPostOnly), off: s.cfg.MCP == nil},
		{pattern: "GET /v1/review", roles: operators, authed: s.listReview, off: noReview},
		{pattern: "POST /v1/review/replay", roles: operators, authed: s.replayReview, off: noReview},
		{pattern: "POST /v1/review/evidence/{id}/resolve", roles: operators, authed: s.resolveEvidence, off: noReview},
		{pattern: "POST /v1/operations/{id}/resolve", roles: operators, authed: s.resolveOperation, off: noReview},
		{pattern: "POST /v1/operations/{id}/retry", roles: operators, authed: s.retryOperation, off: noReview},
	}
}

// routes builds the mux from the route table.
func (s *Server) routes() {
	for _, rt := range s.routeTable() {
		switch {
		case rt.off:
		case len(rt.roles) > 0 && rt.before != nil:
			s.mux.Handle(rt.pattern, s.traced(rt.pattern, rt.before(s.authed(rt.budget, rt.authed, rt.roles...))))
		case len(rt.roles) > 0:
			s.mux.Handle(rt.pattern, s.traced(rt.pattern, s.authed(rt.budget, rt.authed, rt.roles...)))
		default:
			s.mux.Handle(rt.pattern, s.traced(rt.pattern, rt.plain))
		}
	}
	// Every other path and method: the JSON 404 (never the mux's text 404
	// or 405), so every answer is the contract's error body.
	s.mux.HandleFunc("/", s.notFound)
}

// untraced are the routes that never get a server span: probes and
// scrapes, which would drown the operations' traces.
var untraced = []string{"GET /healthz", "GET /readyz", "GET /metrics", "GET /openapi.json"}

// traced wraps the handler of route pattern in its server span (named
// for the route, never its path, which holds ids) when Config.
// TracerProvider is set: a caller's traceparent header is its parent, and
// the request's work (an enqueue) is its child. Without a provider the
// handler is served as it is.
func (s *Server) traced(pattern string, h http.Handler) http.Handler {
	if s.cfg.TracerProvider == nil || slices.Contains(untraced, pattern) {
		return h
	}
	return otelhttp.NewHandler(h, pattern,
		otelhttp.WithTracerProvider(s.cfg.TracerProvider), otelhttp.WithPropagators(tracing.Propagator),
		otelhttp.WithSpanNameFormatter(func(operation string, _ *http.Request) string { return operation }))
}

// serveMetrics is GET /metrics, for a metrics token: the scrape reads the
// ledger and writes nothing (metrics.Folder folds the counts on a timer).
func (s *Server) serveMetrics(w http.ResponseWriter, r *http.Request, _ auth.Principal) {
	s.cfg.Metrics.ServeHTTP(w, r)
}

// healthz is GET /healthz: 200 while the process runs.
func healthz(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
}

// notFound answers every path no route serves.
func (s *Server) notFound(w http.ResponseWriter, r *http.Request) {
	s.writeError(w, r, errorf(http.StatusNotFound, "not_found", "no such endpoint"))
}

// ServeHTTP implements http.Handler.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.mux.ServeHTTP(w, r)
}

// authedHandler is a handler that runs with an authenticated principal.
type authedHandler func(w http.ResponseWriter, r *http.Request, p auth.Principal)

// authed checks the bearer token (401) and the role (403) before h runs:
// the contract's first two checks, in that order. A route may take longer
// than Config.RequestTimeout by what extra says of the request (a long
// poll's wait); nil means no longer.
func (s *Server) authed(extra func(*http.Request) time.Duration, h authedHandler, roles ...auth.Role) http.Handler {
	names := make([]string, len(roles))
	for i, r := range roles {
		names[i] = string(r)
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		timeout := s.cfg.RequestTimeout
		if extra != nil {
			timeout += extra(r)
		}
		ctx, cancel := context.WithTimeout(r.Context(), timeout)
		defer cancel()
		r = r.WithContext(ctx)
		secret, ok := bearer(r)
		if !ok {
			s.writeError(w, r, errUnauthenticated)
			return
		}
		p, err := s.cfg.Tokens.Authenticate(ctx, secret)
		if err != nil {
			s.writeError(w, r, err)
			return
		}
		for _, role := range roles {
			if p.Role == role {
				h(w, r, p)
				return
			}
		}
		s.writeError(w, r, errForbiddenRole(names...))
	})
}

func bearer(r *http.Request) (string, bool) {
	h := r.Header.Get("Authorization")
	scheme, token, ok := strings.Cut(h, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") || strings.TrimSpace(token) == "" {
		return "", false
	}
	return strings.TrimSpace(token), true
}

// ReadyCheck is one backing service /readyz asks.
type ReadyCheck struct {
	// Name is what /readyz reports ("postgres", "nats").
	Name string
	// Check returns nil when the service answers.
	Check func(ctx context.Context) error
}

// Dependency states /readyz reports.
const (
	dependencyUp   = "up"
	dependencyDown = "down"
)

// readyz is GET /readyz: 200 when every backing service answers, else 503
// naming which are down. It is unauthenticated, so it says only "up" or
// "down": an error's text (host names, users, addresses) goes to the log.
func (s *Server) readyz(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), 2*time.Second)
	defer cancel()
	states := make(map[string]string, len(s.cfg.ReadyChecks))
	errs := make([]error, len(s.cfg.ReadyChecks))
	var wg sync.WaitGroup
	for i, c := range s.cfg.ReadyChecks {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = c.Check(ctx)
		}()
	}
	wg.Wait()
	var down []string
	for i, c := range s.cfg.ReadyChecks {
		if errs[i] != nil {
			s.log.WarnContext(ctx, "not ready", "dependency", c.Name, "err", errs[i])
			states[c.Name] = dependencyDown
			down = append(down, c.Name)
			continue
		}
		states[c.Name] = dependencyUp
	}
	if len(down) > 0 {
		writeJSON(w, http.StatusServiceUnavailable, map[string]any{"status": "unavailable", "down": down, "dependencies": states})
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"status": "ready", "dependencies": states})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	_ = enc.Encode(v)
}
