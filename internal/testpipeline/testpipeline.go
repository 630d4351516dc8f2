// Package testpipeline assembles the whole actledger pipeline for a test:
// a fresh database, unique streams on the real NATS server, the mock
// supplier, and the process app.Build wires for `actledger serve` (the HTTP
// API with webhooks and the operator endpoints, the relay, dispatchers, the
// lease sweeper and the reconciler). Tests drive it through the real path
// and count orders at the supplier. The test signals of its relay,
// sweeper, notification worker and dispatchers are armed, so a test waits
// for their moments (Sweeps, a circuit's change) instead of sleeping.
package testpipeline

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	"go.opentelemetry.io/otel/trace"
	"go.yaml.in/yaml/v3"

	"github.com/actledger/actledger/api"
	"github.com/actledger/actledger/api/openapitest"
	"github.com/actledger/actledger/app"
	"github.com/actledger/actledger/auth"
	"github.com/actledger/actledger/broker"
	"github.com/actledger/actledger/dispatcher"
	"github.com/actledger/actledger/internal/mocksupplier"
	"github.com/actledger/actledger/internal/startstop"
	"github.com/actledger/actledger/internal/testdb"
	"github.com/actledger/actledger/internal/testfactory"
	"github.com/actledger/actledger/internal/testnats"
	"github.com/actledger/actledger/internal/testpoll"
	"github.com/actledger/actledger/ledger"
	"github.com/actledger/actledger/notify"
	"github.com/actledger/actledger/provider"
	"github.com/actledger/actledger/reconciler"
	"github.com/actledger/actledger/relay"
	"github.com/actledger/actledger/statement"
)

// Action is the action every pipeline configures, on provider "acme".
const Action = testfactory.DefaultAction

// OtherAction is the action of the second provider, "beta", that every
// pipeline also configures, with its own supplier (Pipeline.Other).
const OtherAction = "ticket.open"

// WebhookSecret signs the mock supplier's webhooks.
const WebhookSecret = "whsec-test"

// Options shape the provider contract and the supplier.
type Options struct {
	Idempotency bool
	// Retention is the idempotency key retention; default 24h.
	Retention time.Duration
	// LookupLag < 0 means the provider has no lookup.
	LookupLag time.Duration
	Mode      mocksupplier.Mode
	// Webhooks makes the supplier send signed webhooks to the API after
	// WebhookDelay.
	Webhooks     bool
	WebhookDelay time.Duration
	MaxAttempts  int           // default 5
	MaxElapsed   time.Duration // default 30s
	Lease        time.Duration // default 2s
	Timeout      time.Duration // the providers' timeout; default 1s
	// ProviderTenant sets the provider's tenant (owner of unmatched
	// evidence); default the pipeline's tenant.
	ProviderTenant string
	// Providers overrides the provider implementation (e.g. to make its
	// lookups fail); it receives the real HTTP provider.
	Providers func(real provider.Provider) provider.Provider
	// ActionContract, when set, is added to Action's entry in the providers
	// file, as YAML flow-mapping entries (e.g. `params_schema: {...},
	// approval: {auto_approve: "params.qty <= 10", policy_version: p1}`).
	ActionContract string
	// Create, when set, replaces the flow mapping of acme's create
	// request (default `method: POST, path: /v1/orders`), e.g. to add a
	// v3 body or reference expression.
	Create string
	// ProviderExtra are YAML lines added to acme's provider block (each
	// indented four spaces), e.g. v3 outcomes rules.
	ProviderExtra string
	// ProvidersFile, when set, is the providers file instead of the one
	// built from the options above (a recipe's, loaded unchanged), with
	// the base_url of each provider named in BaseURLs replaced by its
	// value (a fake of the supplier). The mock suppliers still run, for
	// the providers of the built file.
	ProvidersFile string
	BaseURLs      map[string]string
	// Implementations give provider implementations by name, as a
	// program that embeds actledger does (app.Config.Providers).
	Implementations map[string]provider.Provider
	// Tenant names the pipeline's tenant; default "Acme Corp.". A
	// recipe's providers name the tenant that owns their unmatched
	// evidence.
	Tenant string
	// Clock is the ledger's and the API's clock; nil is a fresh one. A
	// test gives its own when a fake supplier must share it.
	Clock *Clock
	// Logger receives the process's logs; nil discards them.
	Logger *slog.Logger
	// Metrics serves /metrics beside the API.
	Metrics bool
	// Env is the environment the providers file's credentials and
	// webhook secrets are read from (a v3 webhook block's secret_env).
	Env map[string]string
	// TokenCacheTTL is the API process's auth.Config.CacheTTL; default
	// auth.DefaultCacheTTL.
	TokenCacheTTL time.Duration
	// MCPAllowedOrigins is the API's api.Config.MCPAllowedOrigins.
	MCPAllowedOrigins []string
	// MCPAllowedHosts is the API's api.Config.MCPAllowedHosts.
	MCPAllowedHosts []string
	// Access, when set, is the providers file's access: section (its
	// lines, indented two spaces); its client secret is read from Env.
	Access string
	// Notifications, when set, are the providers file's notifications:
	// block, as YAML lines each indented two spaces (a receiver's name)
	// or four (its keys); the process then runs the notification worker.
	// Their secrets are read from Env.
	Notifications string
	// Notify is the notification worker's config template (retry window,
	// backoff, timeout, concurrency).
	Notify notify.Config
	// Pool and Broker replace the fresh database and streams (e.g. to run
	// them behind a proxy that a test cuts).
	Pool   *pgxpool.Pool
	Broker *broker.Broker
	// TracerProvider traces the process (app.Config.TracerProvider), e.g.
	// into the SDK's in-memory exporter.
	TracerProvider trace.TracerProvider
}

// Clock is a test clock shared by the ledger and the API.
type Clock struct{ offset atomic.Int64 }

// Now is the shifted time.
func (c *Clock) Now() time.Time { return time.Now().Add(time.Duration(c.offset.Load())) }

// Advance moves the clock forward.
func (c *Clock) Advance(d time.Duration) { c.offset.Add(int64(d)) }

// Pipeline is a running actledger for one test.
type Pipeline struct {
	t        *testing.T
	Opts     Options
	Pool     *pgxpool.Pool
	Broker   *broker.Broker
	Store    *ledger.Store
	Clock    *Clock
	Supplier *mocksupplier.Server
	// Other is the supplier of provider "beta" (OtherAction): same
	// contract, separate orders.
	Other *mocksupplier.Server
	// Traceparents are the traceparent headers of the requests the acme
	// supplier received, in order ("" for a request without one).
	Traceparents *HeaderLog
	Registry     *provider.Registry
	Reconciler   *reconciler.Reconciler
	// Statements runs providers' statements; StatementSchedule runs them
	// every reconcile.every (checked every 100 ms), its Ran signal armed.
	Statements        *statement.Runner
	StatementSchedule *statement.Scheduler
	// Relay and Sweeper are the process's outbox relay and lease sweeper,
	// their test signals armed.
	Relay   *relay.Relay
	Sweeper *dispatcher.LeaseSweeper
	// Watcher wakes the API's long polls.
	Watcher *ledger.Watcher
	// Notifier is the notification worker, its test signals armed; nil
	// without Options.Notifications.
	Notifier *notify.Worker
	// Tokens is the token store of the process serving the API, with
	// its cache.
	Tokens   *auth.Tokens
	API      *httptest.Server
	Tenant   string
	TenantID uuid.UUID
	// Tokens of the tenant, by role.
	Agent, Approver, Operator string
	// FactoryTenant is the tenant with its tokens' principals, as
	// testfactory.Operation takes it.
	FactoryTenant testfactory.Tenant

	app     *app.App
	running []startstop.Service
	// consoleURL is the console's address on the API's listener.
	consoleURL string
	// urls are the suppliers' addresses, by provider; targets the
	// accounts and environments Retarget set (default DefaultTarget).
	urls    map[string]string
	targets map[string]ledger.Target
}

// StuckAfter is how long the pipeline's lease sweeper lets an operation
// wait for a dispatch message before it publishes one again
// (dispatcher.SweeperConfig.StuckAfter).
const StuckAfter = 10 * time.Second

// DefaultTarget is every provider's account and environment until
// Retarget changes them.
var DefaultTarget = testfactory.DefaultTarget

func quiet() *slog.Logger { return slog.New(slog.DiscardHandler) }

// New builds the pipeline (nothing runs until Start).
func New(t *testing.T, opts Options) *Pipeline {
	t.Helper()
	if opts.MaxAttempts == 0 {
		opts.MaxAttempts = 5
	}
	if opts.MaxElapsed == 0 {
		opts.MaxElapsed = 30 * time.Second
	}
	if opts.Lease == 0 {
		opts.Lease = 2 * time.Second
	}
	if opts.Timeout == 0 {
		opts.Timeout = time.Second
	}
	p := &Pipeline{t: t, Opts: opts, Pool: opts.Pool, Broker: opts.Broker, Clock: cmp.Or(opts.Clock, &Clock{}), Tenant: cmp.Or(opts.Tenant, "Acme Corp.")}
	if p.Pool == nil {
		p.Pool = testdb.New(t)
	}
	if p.Broker == nil {
		p.Broker = testnats.New(t)
	}
	lag := max(opts.LookupLag, 0)
	p.Supplier = mocksupplier.New(mocksupplier.Config{Idempotency: opts.Mode, LookupLag: lag, Logger: quiet(), Now: p.Clock.Now})
	p.Traceparents = &HeaderLog{Name: "traceparent"}
	supplierSrv := httptest.NewServer(p.Traceparents.Handler(p.Supplier))
	t.Cleanup(func() { supplierSrv.Close(); p.Supplier.Close() })

	p.Other = mocksupplier.New(mocksupplier.Config{Idempotency: opts.Mode, LookupLag: lag, Logger: quiet(), Now: p.Clock.Now})
	otherSrv := httptest.NewServer(p.Other)
	t.Cleanup(func() { otherSrv.Close(); p.Other.Close() })

	p.urls = map[string]string{"acme": supplierSrv.URL, "beta": otherSrv.URL}
	p.targets = map[string]ledger.Target{}
	// The API's listener is bound before the process is wired, so that
	// the console knows its own address (the sign-in's redirect URL).
	p.API = httptest.NewUnstartedServer(nil)
	p.consoleURL = "http://" + p.API.Listener.Addr().String() + "/console"
	p.build()
	tenant := testfactory.NewTenant(t, p.Tokens, p.Tenant)
	p.Agent, p.Approver, p.Operator = tenant.Agent.Secret, tenant.Approver.Secret, tenant.Operator.Secret
	p.TenantID, p.FactoryTenant = tenant.ID, tenant

	// Every request a pipeline test makes of the API, and every answer,
	// is checked against the OpenAPI document; the web console beside it
	// is not part of the document.
	p.API.Config.Handler = openapitest.Handler(t, p.app.Handler, "/console/")
	p.API.Start()
	t.Cleanup(p.API.Close)
	if opts.Webhooks {
		p.Supplier.SetWebhook(&mocksupplier.WebhookConfig{URL: p.API.URL + "/v1/webhooks/acme", Secret: WebhookSecret, Delay: opts.WebhookDelay})
	}
	t.Cleanup(p.StopAll)
	return p
}

// build wires the process (app.Build) for the registry of the suppliers
// and targets.
func (p *Pipeline) build() {
	p.t.Helper()
	opts := p.Opts
	p.Registry = p.registry()
	providers := maps.Clone(opts.Implementations)
	if opts.Providers != nil {
		acme, _ := p.Registry.Provider("acme")
		providers = map[string]provider.Provider{"acme": opts.Providers(provider.NewHTTP(acme, provider.HTTPOptions{TracerProvider: opts.TracerProvider}))}
	}
	var err error
	p.app, err = app.Build(context.Background(), app.Config{
		Pool: p.Pool, Broker: p.Broker, Registry: p.Registry, Providers: providers, Now: p.Clock.Now,
		// Dispatchers are added by Start, fresh each time, as a new
		// process's would be.
		Roles:      app.Roles{API: true, Relay: true, Sweeper: app.SweeperAlways, Reconciler: true, Notify: opts.Notifications != ""},
		Notify:     opts.Notify,
		ConsoleURL: p.consoleURL,
		Dispatcher: dispatcher.Config{LeaseDuration: opts.Lease, Concurrency: 4},
		Sweeper:    dispatcher.SweeperConfig{Interval: 100 * time.Millisecond, StuckAfter: StuckAfter},
		Relay:      relay.Config{PollInterval: 100 * time.Millisecond},
		Auth:       auth.Config{CacheTTL: opts.TokenCacheTTL},
		API: api.Config{WebhookSecrets: func(name string) ([][]byte, bool) {
			pc, ok := p.Registry.Provider(name)
			switch {
			case !ok:
				return nil, false
			case pc.Webhook != nil || p.Opts.ProvidersFile != "":
				return pc.WebhookSecretsFrom(p.getenv), pc.Webhook != nil || pc.WebhookSecretEnv != ""
			case name != "acme":
				return nil, false
			}
			return [][]byte{[]byte(WebhookSecret)}, true
		}, MCPAllowedOrigins: opts.MCPAllowedOrigins, MCPAllowedHosts: opts.MCPAllowedHosts},
		Logger:         cmp.Or(opts.Logger, quiet()),
		Metrics:        opts.Metrics,
		TracerProvider: opts.TracerProvider,
		StatementCheck: 100 * time.Millisecond,
	})
	if err != nil {
		p.t.Fatal(err)
	}
	p.Store, p.Reconciler, p.Tokens, p.Notifier = p.app.Store, p.app.Reconciler, p.app.Tokens, p.app.Notifier
	p.Relay, p.Sweeper, p.Watcher = p.app.Relay, p.app.Sweeper, p.app.Watcher
	p.Statements, p.StatementSchedule = p.app.Statements, p.app.StatementSchedule
	// Armed before anything runs: arming is not synchronised with the
	// components' loops.
	p.Relay.TestSignals.Init(p.t)
	p.Sweeper.TestSignals.Init(p.t)
	p.StatementSchedule.TestSignals.Ran.Init(p.t)
	if p.Notifier != nil {
		p.Notifier.TestSignals.Init(p.t)
	}
}

// Retarget points providerName at another account and environment, as an
// edited providers file does, and wires the process again for it: call it
// before Start, or between StopAll and Start (a restart). The API keeps
// serving from the process built first, binding new approvals to the
// targets it was built with.
func (p *Pipeline) Retarget(providerName string, t ledger.Target) {
	p.t.Helper()
	p.targets[providerName] = t
	p.build()
}

func (p *Pipeline) registry() *provider.Registry {
	if p.Opts.ProvidersFile != "" {
		reg, err := provider.ParseEnv(withBaseURLs(p.t, p.Opts.ProvidersFile, p.Opts.BaseURLs), p.getenv)
		if err != nil {
			p.t.Fatal(err)
		}
		return reg
	}
	var y strings.Builder
	y.WriteString("providers:\n")
	for name, url := range p.urls {
		p.providerYAML(&y, name, url)
	}
	contract := ""
	if p.Opts.ActionContract != "" {
		contract = ", " + p.Opts.ActionContract
	}
	fmt.Fprintf(&y, "actions:\n  %s: {provider: acme%s}\n  %s: {provider: beta}\n", Action, contract, OtherAction)
	if p.Opts.Notifications != "" {
		fmt.Fprintf(&y, "notifications:\n%s", p.Opts.Notifications)
	}
	if p.Opts.Access != "" {
		fmt.Fprintf(&y, "access:\n%s", p.Opts.Access)
	}
	reg, err := provider.ParseEnv([]byte(y.String()), p.getenv)
	if err != nil {
		p.t.Fatal(err)
	}
	return reg
}

func (p *Pipeline) providerYAML(y *strings.Builder, name, baseURL string) {
	t, ok := p.targets[name]
	if !ok {
		t = DefaultTarget
	}
	fmt.Fprintf(y, "  %s:\n    base_url: %s\n    account: %s\n    environment: %s\n    timeout: %s\n", name, baseURL, t.Account, t.Environment, p.Opts.Timeout)
	create := "method: POST, path: /v1/orders"
	if name == "acme" && p.Opts.Create != "" {
		create = p.Opts.Create
	}
	fmt.Fprintf(y, "    create: {%s}\n    reference_param: client_reference\n    reference_field: id\n", create)
	if name == "acme" {
		y.WriteString(p.Opts.ProviderExtra)
	}
	if p.Opts.Idempotency {
		fmt.Fprintf(y, "    idempotency: {header: Idempotency-Key, retention: %s}\n", cmp.Or(p.Opts.Retention, 24*time.Hour))
	}
	if p.Opts.LookupLag >= 0 {
		fmt.Fprintf(y, "    lookup: {path: \"/v1/orders?client_reference={reference}\", visibility_lag: %s}\n", p.Opts.LookupLag)
	}
	fmt.Fprintf(y, "    retry: {max_attempts: %d, initial: 50ms, max: 200ms, max_elapsed: %s}\n", p.Opts.MaxAttempts, p.Opts.MaxElapsed)
	fmt.Fprintf(y, "    tenant: %q\n", firstNonEmpty(p.Opts.ProviderTenant, p.Tenant))
	y.WriteString("    review: {owner: supply-ops, deadline: 4h}\n")
}

// withBaseURLs is the providers file doc with the base_url of each
// provider in urls replaced, and nothing else changed.
func withBaseURLs(t *testing.T, doc string, urls map[string]string) []byte {
	t.Helper()
	var root yaml.Node
	if err := yaml.Unmarshal([]byte(doc), &root); err != nil {
		t.Fatalf("providers file: %v", err)
	}
	replaced := 0
	if top := root.Content[0]; top.Kind == yaml.MappingNode {
		for i := 0; i+1 < len(top.Content); i += 2 {
			if top.Content[i].Value != "providers" {
				continue
			}
			providers := top.Content[i+1]
			for j := 0; j+1 < len(providers.Content); j += 2 {
				url, ok := urls[providers.Content[j].Value]
				if !ok {
					continue
				}
				fields := providers.Content[j+1]
				for k := 0; k+1 < len(fields.Content); k += 2 {
					if fields.Content[k].Value == "base_url" {
						fields.Content[k+1].Value = url
						replaced++
					}
				}
			}
		}
	}
	if replaced != len(urls) {
		t.Fatalf("providers file: replaced %d base_url, want %d (%v)", replaced, len(urls), urls)
	}
	out, err := yaml.Marshal(&root)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// getenv reads Options.Env.
func (p *Pipeline) getenv(name string) string { return p.Opts.Env[name] }

func firstNonEmpty(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// TokenFor issues a token of role for another tenant.
func (p *Pipeline) TokenFor(tenant string, role auth.Role) string {
	p.t.Helper()
	c, err := p.CLITokens().Create(context.Background(), tenant, role, "")
	if err != nil {
		p.t.Fatal(err)
	}
	return c.Secret
}

// ScopedToken issues a token of role for the pipeline's tenant with the
// access scope scope.
func (p *Pipeline) ScopedToken(scope string, role auth.Role) string {
	p.t.Helper()
	return testfactory.NewScopedToken(p.t, p.Tokens, p.Tenant, role, scope).Secret
}

// CLITokens is a token store of another process on the pipeline's
// database, as `actledger token create|revoke` opens one: what it revokes
// is not evicted from the API process's cache.
func (p *Pipeline) CLITokens() *auth.Tokens {
	p.t.Helper()
	tokens, err := auth.New(p.Pool, p.Store, auth.Config{})
	if err != nil {
		p.t.Fatal(err)
	}
	return tokens
}

// Start runs the relay, the lease sweeper, the reconciler and n fresh
// dispatchers (with nothing in memory from an earlier Start), their test
// signals armed.
func (p *Pipeline) Start(dispatchers int) []*dispatcher.Dispatcher {
	p.t.Helper()
	p.start(p.app)
	var ds []*dispatcher.Dispatcher
	for i := range dispatchers {
		d, err := p.app.NewDispatcher(fmt.Sprintf("w%d", i))
		if err != nil {
			p.t.Fatal(err)
		}
		d.TestSignals.Init(p.t)
		ds = append(ds, d)
		p.start(d)
	}
	return ds
}

// Sweeps waits for n sweeps of the lease sweeper that begin after the
// call and end without error.
func (p *Pipeline) Sweeps(n int) {
	p.t.Helper()
	swept := &p.Sweeper.TestSignals.Swept
	swept.Clear()
	// A sweep under way while Clear ran may end after it: it is not one
	// of the n.
	for range n + 1 {
		swept.WaitOrTimeout()
	}
}

func (p *Pipeline) start(s startstop.Service) {
	p.t.Helper()
	if err := s.Start(context.Background()); err != nil {
		p.t.Fatal(err)
	}
	p.running = append(p.running, s)
}

// StopAll stops everything Start started, newest first.
func (p *Pipeline) StopAll() {
	startstop.StopAll(p.running...)
	p.running = nil
}

// Approve grants an approval for params, valid for ttl of the test clock.
func (p *Pipeline) Approve(params string, ttl time.Duration) ledger.Approval {
	p.t.Helper()
	return p.approve(Action, params, ttl)
}

// ApproveAction grants an approval of params for action, as an approver
// does.
func (p *Pipeline) ApproveAction(action, params string, ttl time.Duration) ledger.Approval {
	p.t.Helper()
	return p.approve(action, params, ttl)
}

// approve grants an approval bound to the account and environment action
// points at now.
func (p *Pipeline) approve(action, params string, ttl time.Duration) ledger.Approval {
	p.t.Helper()
	pc, ok := p.Registry.ForAction(action)
	if !ok {
		p.t.Fatalf("action %s is not configured", action)
	}
	a, err := p.Store.CreateApproval(context.Background(), ledger.NewApproval{
		TenantID: p.TenantID, ApproverTokenID: p.FactoryTenant.Approver.TokenID, Action: action,
		Params: []byte(params), PolicyVersion: "p1", ExpiresAt: p.Clock.Now().Add(ttl),
		Target: &ledger.Target{Account: pc.Account, Environment: pc.Environment},
	})
	if err != nil {
		p.t.Fatal(err)
	}
	return a
}

// Enqueue approves params and submits them over HTTP under key, as an
// agent does; it returns the operation.
func (p *Pipeline) Enqueue(key, params string) ledger.Operation {
	p.t.Helper()
	return p.EnqueueAction(Action, key, params)
}

// EnqueueAction is Enqueue for another action (OtherAction).
func (p *Pipeline) EnqueueAction(action, key, params string) ledger.Operation {
	p.t.Helper()
	a := p.approve(action, params, time.Hour)
	body := fmt.Sprintf(`{"action":%q,"key":%q,"params":%s,"approval_id":%q}`, action, key, params, a.ID)
	status, out := p.Do("POST", "/v1/operations", p.Agent, body)
	if status != http.StatusCreated {
		p.t.Fatalf("enqueue %s: %d %v", key, status, out)
	}
	op, err := p.Store.Get(context.Background(), ledger.WholeTenant(p.TenantID), uuid.MustParse(out["id"].(string)))
	if err != nil {
		p.t.Fatal(err)
	}
	return op
}

// Propose submits params under key as a proposal (request_approval), as
// an agent does; it returns the answer's status and body.
func (p *Pipeline) Propose(key, params string) (int, map[string]any) {
	p.t.Helper()
	body := fmt.Sprintf(`{"action":%q,"key":%q,"params":%s,"request_approval":true,"reason":"restock"}`, Action, key, params)
	return p.Do("POST", "/v1/operations", p.Agent, body)
}

// Operation reads the operation an answer's body names.
func (p *Pipeline) Operation(out map[string]any) ledger.Operation {
	p.t.Helper()
	id, err := uuid.Parse(fmt.Sprint(out["id"]))
	if err != nil {
		p.t.Fatalf("the answer names no operation: %v", out)
	}
	op, err := p.Store.Get(context.Background(), ledger.WholeTenant(p.TenantID), id)
	if err != nil {
		p.t.Fatal(err)
	}
	return op
}

// MetricsToken issues a token of role metrics, the only one GET /metrics
// answers.
func (p *Pipeline) MetricsToken() string {
	p.t.Helper()
	return p.TokenFor("monitoring", auth.RoleMetrics)
}

// ConsoleCookie signs in to the console with token, as a browser does,
// and returns the session cookie it was given.
func (p *Pipeline) ConsoleCookie(token string) *http.Cookie {
	p.t.Helper()
	req, err := http.NewRequest(http.MethodPost, p.API.URL+"/console/signin", strings.NewReader(url.Values{"token": {token}}.Encode()))
	if err != nil {
		p.t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Sec-Fetch-Site", "same-origin")
	client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	res, err := client.Do(req)
	if err != nil {
		p.t.Fatal(err)
	}
	res.Body.Close()
	for _, c := range res.Cookies() {
		if c.Name == "actledger_console" && c.Value != "" {
			return c
		}
	}
	p.t.Fatalf("console sign-in answered %d without a session cookie", res.StatusCode)
	return nil
}

// Do sends an API request and decodes a JSON object answer.
func (p *Pipeline) Do(method, path, token, body string) (int, map[string]any) {
	p.t.Helper()
	req, err := http.NewRequest(method, p.API.URL+path, bytes.NewBufferString(body))
	if err != nil {
		p.t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		p.t.Fatal(err)
	}
	defer res.Body.Close()
	raw, _ := io.ReadAll(res.Body)
	var out map[string]any
	_ = json.Unmarshal(raw, &out)
	if out == nil {
		out = map[string]any{"raw": string(raw)}
	}
	return res.StatusCode, out
}

// Get reads op again.
func (p *Pipeline) Get(op ledger.Operation) ledger.Operation {
	p.t.Helper()
	got, err := p.Store.Get(context.Background(), ledger.WholeTenant(p.TenantID), op.ID)
	if err != nil {
		p.t.Fatal(err)
	}
	return got
}

// WaitStatus polls until op is in want, failing with its history if it
// does not get there in time.
func (p *Pipeline) WaitStatus(op ledger.Operation, want ledger.Status, timeout time.Duration) ledger.Operation {
	p.t.Helper()
	var got ledger.Operation
	testpoll.Until(p.t, timeout, func() error {
		if got = p.Get(op); got.Status != want {
			return statusError{p: p, op: got, want: want}
		}
		return nil
	})
	return got
}

// statusError is an operation not (yet) in the status a test waits for;
// its message, written only when the wait fails, holds the history.
type statusError struct {
	p    *Pipeline
	op   ledger.Operation
	want ledger.Status
}

func (e statusError) Error() string {
	return fmt.Sprintf("operation %s is %s, want %s; history:\n%s", e.op.Key, e.op.Status, e.want, e.p.History(e.op))
}

// History renders op's events for failure messages.
func (p *Pipeline) History(op ledger.Operation) string {
	events, _ := p.Store.Events(context.Background(), ledger.WholeTenant(p.TenantID), op.ID)
	var b strings.Builder
	for _, e := range events {
		from := ""
		if e.From != nil {
			from = string(*e.From)
		}
		fmt.Fprintf(&b, "  %s %-24s %s→%s %s %s\n", e.At.Format("15:04:05.000"), e.Kind, from, e.To, e.Actor, e.Detail)
	}
	return b.String()
}

// Kinds lists op's event kinds in order, leaving out the sweeper's
// re-publish notes (redispatched): they change no state, and whether one
// lands before a claim depends on timing a test does not control.
func (p *Pipeline) Kinds(op ledger.Operation) []string {
	p.t.Helper()
	events, err := p.Store.Events(context.Background(), ledger.WholeTenant(p.TenantID), op.ID)
	if err != nil {
		p.t.Fatal(err)
	}
	var kinds []string
	for _, e := range events {
		if e.Kind != ledger.EventRedispatched {
			kinds = append(kinds, string(e.Kind))
		}
	}
	return kinds
}

// Orders is the supplier's real order count for op.
func (p *Pipeline) Orders(op ledger.Operation) int { return p.Supplier.Orders(op.ExternalKey) }

// NothingMore asserts that nothing more happens to op, which should stay
// as it is (in review, say): once the pipeline has Settled, it moves the
// clock past StuckAfter and waits for three sweeps and for the pipeline to
// settle again; op must then have the version and the events it had, and
// no dispatch message may wait to send it, due or scheduled. A test waits
// on this, not on a sleep, before it counts what the supplier got. The
// clock's move expires the leases of operations in flight too: call it
// when none is. It returns op as it is.
func (p *Pipeline) NothingMore(op ledger.Operation, timeout time.Duration) ledger.Operation {
	p.t.Helper()
	p.Settled(timeout)
	before, history := p.Get(op), p.History(op)
	p.Clock.Advance(StuckAfter)
	p.Sweeps(3)
	p.Settled(timeout)
	after := p.Get(op)
	if after.Version != before.Version || p.History(op) != history || p.Pending(op) != 0 {
		p.t.Fatalf("operation %s moved on from %s at version %d to %s at version %d, %d messages waiting to send it; history before:\n%s\nafter:\n%s",
			op.Key, before.Status, before.Version, after.Status, after.Version, p.Pending(op), history, p.History(op))
	}
	return after
}

// Pending counts op's dispatch messages still in the outbox, due now or
// scheduled for later (a retry's backoff, a lookup after the supplier's
// lag): a test asserting that nothing will send op again checks it is 0
// once the pipeline Settled, which does not wait for scheduled ones.
func (p *Pipeline) Pending(op ledger.Operation) int {
	p.t.Helper()
	var n int
	if err := p.Pool.QueryRow(context.Background(), `SELECT count(*) FROM outbox
WHERE published_at IS NULL AND msg_id LIKE 'dispatch.%' AND split_part(msg_id, '.', 2) = $1::text`, op.ID).Scan(&n); err != nil {
		p.t.Fatal(err)
	}
	return n
}

// Creates is how many create requests the supplier received for op.
func (p *Pipeline) Creates(op ledger.Operation) int {
	return len(p.Supplier.CreateRequests(op.ExternalKey))
}

// Eventually polls cond until it holds or fails the test after timeout.
func (p *Pipeline) Eventually(timeout time.Duration, what string, cond func() bool) {
	p.t.Helper()
	testpoll.Until(p.t, timeout, func() error {
		if !cond() {
			return errors.New("still waiting for " + what)
		}
		return nil
	})
}

// Settled waits until everything the pipeline has been handed so far has
// been handled: no outbox row that is due waits to be published, and every
// durable consumer of the dispatch and evidence streams has delivered and
// had acknowledged every message (a handler acknowledges only after its
// writes committed). A test that asserts "nothing more happened" waits on
// this instead of sleeping: it fails after timeout rather than passing
// early on a slow machine. Messages scheduled for later (a retry's backoff)
// are not waited for.
func (p *Pipeline) Settled(timeout time.Duration) {
	p.t.Helper()
	p.settled(timeout, "the pipeline to settle", outboxDueWaiting, p.Broker.OpsStream(), p.Broker.EvidenceStream())
}

// NotificationsSettled waits until no outbox row waits to be published
// (a scheduled one included) and every receiver's consumer of the
// notification stream has delivered and had acknowledged every message:
// what a test that counts deliveries waits on.
func (p *Pipeline) NotificationsSettled(timeout time.Duration) {
	p.t.Helper()
	p.settled(timeout, "the notifications to settle", outboxWaiting, p.Broker.NotifyStream())
}

const (
	// outboxDueWaiting counts the outbox rows due and not published.
	outboxDueWaiting = `SELECT count(*) FROM outbox
WHERE published_at IS NULL AND (deliver_after IS NULL OR deliver_after <= now())`
	// outboxWaiting counts every outbox row not published.
	outboxWaiting = `SELECT count(*) FROM outbox WHERE published_at IS NULL`
)

// settled waits until waiting counts no outbox row and every durable
// consumer of streams has nothing pending or unacknowledged, twice in a
// row: a handler between its commit and its ack would otherwise pass the
// first look.
func (p *Pipeline) settled(timeout time.Duration, what, waiting string, streams ...string) {
	p.t.Helper()
	ctx := context.Background()
	js := p.Broker.JetStream()
	quiet := func() bool {
		var due int
		if err := p.Pool.QueryRow(ctx, waiting).Scan(&due); err != nil || due > 0 {
			return false
		}
		for _, name := range streams {
			stream, err := js.Stream(ctx, name)
			if err != nil {
				return false
			}
			consumers := stream.ListConsumers(ctx)
			for c := range consumers.Info() {
				if c.NumPending > 0 || c.NumAckPending > 0 {
					return false
				}
			}
			if consumers.Err() != nil {
				return false
			}
		}
		return true
	}
	p.Eventually(timeout, what, func() bool {
		if !quiet() {
			return false
		}
		return quiet()
	})
}

// ReconcileSection is a statement for provider acme (Options.ProviderExtra):
// the demo supplier's orders listed two a page (so that a window spans
// pages), matched by sku, over the last hour; a second of lag and of
// skew, which a test advances the clock past before a run.
const ReconcileSection = `    reconcile:
      list:
        path: "/v1/statement?created_gte={since}&created_lt={until}&limit=2"
        records: response.orders
        next: 'response.next != null ? {"after": response.next} : {}'
        reference: 'record.client_reference != "" ? record.client_reference : null'
        provider_reference: record.id
        created: record.created_at
        max_pages: 20
      match: record.params.sku == params.sku
      window: 1h
      lag: 1s
      skew: 1s
`

// HeaderLog records one header of every request a handler receives: what
// a supplier was sent, as it saw it.
type HeaderLog struct {
	// Name is the header recorded.
	Name string
	// Path, when set, records only the requests of that path (the
	// creates, say, not the lookups and statement pages).
	Path   string
	mu     sync.Mutex
	values []string
}

// Handler serves h, recording the header of each request first.
func (l *HeaderLog) Handler(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if l.Path == "" || r.URL.Path == l.Path {
			l.mu.Lock()
			l.values = append(l.values, r.Header.Get(l.Name))
			l.mu.Unlock()
		}
		h.ServeHTTP(w, r)
	})
}

// Values are the recorded values, in the order the requests came.
func (l *HeaderLog) Values() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.values)
}

// LedgerBehindPauses are tenant's dispatch pauses of reason
// ledger.PauseLedgerBehind.
func (p *Pipeline) LedgerBehindPauses(tenant uuid.UUID) []ledger.Pause {
	p.t.Helper()
	all, err := p.Store.Pauses(context.Background(), tenant)
	if err != nil {
		p.t.Fatal(err)
	}
	var out []ledger.Pause
	for _, pz := range all {
		if pz.Reason == ledger.PauseLedgerBehind {
			out = append(out, pz)
		}
	}
	return out
}
