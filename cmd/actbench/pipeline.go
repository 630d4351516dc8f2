package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/actledger/actledger/app"
	"github.com/actledger/actledger/auth"
	"github.com/actledger/actledger/broker"
	"github.com/actledger/actledger/internal/mocksupplier"
	"github.com/actledger/actledger/ledger"
	"github.com/actledger/actledger/notify"
	"github.com/actledger/actledger/provider"
	"github.com/actledger/actledger/relay"
)

// The one action and provider every pipeline configures.
const (
	benchAction   = "supplier.create_order"
	benchProvider = "acme"
	benchTenant   = "bench"
	benchParams   = `{"sku":"bolt-m8","qty":3}`
)

// env is what every stage shares for the whole run: where Postgres and
// NATS are, and the one mock supplier whose order counts prove "at most
// once" over the run.
type env struct {
	adminURL string
	natsURL  string
	supplier *supplier
	// large, when set, is the ledger every pipeline runs on instead of a
	// fresh database (the large stage's).
	large *database
	// reconcileEvery, when above 0, runs the provider's statement on
	// that schedule beside every end-to-end stage (--reconcile-every).
	reconcileEvery time.Duration
}

// benchAccount and benchEnvironment are the supplier's account and
// environment in the providers config, which every approval is bound to.
const (
	benchAccount     = "acct_bench"
	benchEnvironment = "test"
)

// supplier is the mock supplier in fast mode (no faults, idempotency keys
// honoured) behind a real HTTP server on a loopback port.
type supplier struct {
	*mocksupplier.Server
	srv      *http.Server
	registry *provider.Registry
	// yaml is the providers file registry was parsed from, which a stage
	// may extend (the notify stage's receivers).
	yaml string
}

// startSupplier serves a new mock supplier and parses the providers
// configuration that points at it.
func startSupplier() (*supplier, error) { return serveSupplier("") }

// serveSupplier serves a new mock supplier and parses the providers
// configuration that points at it, with extra (lines of the provider's
// section, such as its tenant and reconcile section) added to the
// provider.
func serveSupplier(extra string) (*supplier, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("mock supplier: %w", err)
	}
	s := &supplier{Server: mocksupplier.New(mocksupplier.Config{})}
	s.srv = &http.Server{Handler: s.Server, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = s.srv.Serve(ln) }()
	// The provider contract of the demo (demo/providers.yaml), pointed at
	// this supplier.
	var y strings.Builder
	fmt.Fprintf(&y, "providers:\n  %s:\n    base_url: http://%s\n", benchProvider, ln.Addr())
	fmt.Fprintf(&y, "    account: %s\n    environment: %s\n    timeout: 2s\n", benchAccount, benchEnvironment)
	y.WriteString("    create: {method: POST, path: /v1/orders}\n    reference_param: client_reference\n    reference_field: id\n")
	y.WriteString("    idempotency: {header: Idempotency-Key, retention: 24h}\n")
	y.WriteString("    lookup: {path: \"/v1/orders?client_reference={reference}\", visibility_lag: 2s}\n")
	y.WriteString("    retry: {max_attempts: 5, initial: 100ms, max: 5s, max_elapsed: 60s}\n")
	y.WriteString("    review: {owner: supply-ops, deadline: 4h}\n")
	y.WriteString(extra)
	fmt.Fprintf(&y, "actions:\n  %s: {provider: %s}\n", benchAction, benchProvider)
	s.yaml = y.String()
	if s.registry, err = provider.Parse([]byte(s.yaml)); err != nil {
		s.close()
		return nil, fmt.Errorf("mock supplier providers config: %w", err)
	}
	return s, nil
}

// close stops the supplier's server and its pending webhooks.
func (s *supplier) close() {
	_ = s.srv.Close()
	s.Server.Close()
}

// roles says which parts of actledger a stage runs; the database and the
// streams are always there.
type roles struct {
	API, Relay, Dispatcher bool
	// Later builds the roles without starting them: the stage calls
	// pipeline.start when its timing begins.
	Later bool
	// Statements runs the statement schedule (the reconciler's role, as
	// `actledger serve` runs it), looking for a due run every second.
	Statements bool
	// Notify, when set, runs the notification worker so configured on
	// Registry's receivers.
	Notify *notify.Config
	// Registry is the providers file; nil: the supplier's.
	Registry *provider.Registry
}

// pipeline is actledger assembled in-process by app.Build, as `actledger
// serve` assembles it, on a fresh database and on streams under a unique
// prefix, both removed by close (or on the large ledger, which close
// leaves, and streams under largePrefix).
type pipeline struct {
	db       *database
	app      *app.App
	broker   *broker.Broker
	store    *ledger.Store
	relay    *relay.Relay
	server   *http.Server
	client   *http.Client
	url      string // the API's base URL
	agent    string // an agent token
	tenantID uuid.UUID
	approver uuid.UUID // an approver token's id
}

// quiet is the logger of every component: a benchmark measures work, not
// log formatting (the API logs one line per request at info level).
func quiet() *slog.Logger { return slog.New(slog.DiscardHandler) }

// newPipeline creates the database and streams and starts what r asks
// (unless r.Later). The relay and the dispatcher are configured as
// `actledger serve` configures them by default (default batches,
// LISTEN/NOTIFY and a 1 s poll).
func newPipeline(ctx context.Context, e *env, r roles) (_ *pipeline, err error) {
	p := &pipeline{}
	defer func() {
		if err != nil {
			p.close(ctx)
		}
	}()
	prefix := strings.ToUpper(uniqueName("BENCH"))
	if e.large != nil {
		p.db, prefix = e.large, largePrefix
	} else if p.db, err = createDatabase(ctx, e.adminURL, databasePrefix, poolMaxConns, true); err != nil {
		return nil, err
	}
	p.app, err = app.Build(ctx, app.Config{
		Pool:     p.db.pool,
		NATS:     broker.Config{URL: e.natsURL, Prefix: prefix, Name: "actbench"},
		Registry: cmp.Or(r.Registry, e.supplier.registry),
		// The stages measure the pipeline without the lease sweeper.
		Roles: app.Roles{API: r.API, Relay: r.Relay, Dispatcher: r.Dispatcher, Reconciler: r.Statements, Sweeper: app.SweeperNever,
			Notify: r.Notify != nil},
		Notify:         notifyConfig(r.Notify),
		StatementCheck: time.Second,
		Logger:         quiet(),
	})
	if err != nil {
		return nil, fmt.Errorf("build the pipeline (is nats-server -js running at %s? set BENCH_NATS_URL): %w", e.natsURL, err)
	}
	p.broker, p.store, p.relay = p.app.Broker, p.app.Store, p.app.Relay
	agent, err := p.app.Tokens.Create(ctx, benchTenant, auth.RoleAgent, "")
	if err != nil {
		return nil, err
	}
	approver, err := p.app.Tokens.Create(ctx, benchTenant, auth.RoleApprover, "")
	if err != nil {
		return nil, err
	}
	principal, err := p.app.Tokens.Authenticate(ctx, agent.Secret)
	if err != nil {
		return nil, err
	}
	p.agent, p.tenantID, p.approver = agent.Secret, principal.TenantID, approver.ID

	if !r.Later {
		if err := p.start(ctx); err != nil {
			return nil, err
		}
	}
	if r.API {
		if err := p.serveAPI(); err != nil {
			return nil, err
		}
	}
	return p, nil
}

// start starts the roles the pipeline was built with.
func (p *pipeline) start(ctx context.Context) error { return p.app.Start(ctx) }

// serveAPI serves the app's handler on a loopback port with a real
// http.Server, and makes a client that keeps connections alive for every
// load generator.
func (p *pipeline) serveAPI() error {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return fmt.Errorf("listen for the API: %w", err)
	}
	p.server = &http.Server{Handler: p.app.Handler, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = p.server.Serve(ln) }()
	p.url = "http://" + ln.Addr().String()
	p.client = &http.Client{Transport: &http.Transport{
		MaxIdleConns: 1024, MaxIdleConnsPerHost: 1024, IdleConnTimeout: time.Minute,
	}}
	return nil
}

// approve grants an approval of benchParams that any number of operations
// may use (each with its own key). Every load-generating client gets its
// own, so clients never queue on one approval's row lock.
func (p *pipeline) approve(ctx context.Context) (uuid.UUID, error) {
	a, err := p.store.CreateApproval(ctx, ledger.NewApproval{
		TenantID: p.tenantID, ApproverTokenID: p.approver, Action: benchAction,
		Params: []byte(benchParams), PolicyVersion: "bench", ExpiresAt: time.Now().Add(time.Hour), MaxUses: 1 << 30,
		Target: &ledger.Target{Account: benchAccount, Environment: benchEnvironment},
	})
	return a.ID, err
}

// approvals grants n approvals.
func (p *pipeline) approvals(ctx context.Context, n int) ([]uuid.UUID, error) {
	ids := make([]uuid.UUID, n)
	for i := range ids {
		var err error
		if ids[i], err = p.approve(ctx); err != nil {
			return nil, err
		}
	}
	return ids, nil
}

// close stops everything, newest first, deletes the streams and drops the
// database.
func (p *pipeline) close(ctx context.Context) {
	ctx = context.WithoutCancel(ctx)
	if p.server != nil {
		shutdown, cancel := context.WithTimeout(ctx, 10*time.Second)
		_ = p.server.Shutdown(shutdown)
		cancel()
		p.client.CloseIdleConnections()
	}
	if p.app != nil {
		p.app.Stop()
	}
	if p.broker != nil {
		cleanup, cancel := context.WithTimeout(ctx, 30*time.Second)
		if err := p.broker.DeleteStreams(cleanup); err != nil && !errors.Is(err, context.Canceled) {
			logf("warning: %v", err)
		}
		cancel()
		p.broker.Close()
	}
	if p.db != nil {
		p.db.drop(ctx)
	}
}
