// Package app wires actledger's pipeline once: the ledger store on a pool,
// the broker, the provider registry, and the roles a process runs (HTTP API,
// outbox relay, dispatchers, lease sweeper, reconciler, notification
// worker, metrics). `actledger serve`, `actledger demo`, actbench and the
// test pipeline all build their
// process with Build, so a component added or rewired here is added or
// rewired everywhere. A Go program that embeds actledger builds it too,
// and may give its own provider.Provider for a provider name
// (Config.Providers: a supplier reached by SMTP, gRPC or a database): the
// same claims, leases, unknown-outcome rules and review apply to it.
//
// It never opens the database (callers differ: localpg, a benchmark's fresh
// database, a test's template copy) and never serves HTTP (callers choose
// the listener); it hands back the handler.
package app

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"go.opentelemetry.io/otel/trace"

	"github.com/actledger/actledger/api"
	"github.com/actledger/actledger/auth"
	"github.com/actledger/actledger/broker"
	"github.com/actledger/actledger/console"
	"github.com/actledger/actledger/dispatcher"
	"github.com/actledger/actledger/internal/startstop"
	"github.com/actledger/actledger/ledger"
	"github.com/actledger/actledger/mcp"
	"github.com/actledger/actledger/metrics"
	"github.com/actledger/actledger/notify"
	"github.com/actledger/actledger/outbox"
	"github.com/actledger/actledger/provider"
	"github.com/actledger/actledger/reconciler"
	"github.com/actledger/actledger/relay"
	"github.com/actledger/actledger/retention"
	"github.com/actledger/actledger/sso"
	"github.com/actledger/actledger/statement"
)

// DefaultDispatchers is Config.Dispatchers' default: one dispatcher per
// process runs Dispatcher.Concurrency workers per provider.
const DefaultDispatchers = 1

// Roles says which long-running parts a process runs. The ledger store,
// the token store and the reconciler's operator methods are always there.
type Roles struct {
	// API builds the HTTP handler (App.Handler).
	API bool
	// Relay publishes outbox rows to JetStream.
	Relay bool
	// Dispatcher runs Config.Dispatchers dispatchers and, unless Sweeper
	// says otherwise, the lease sweeper that backs them up: a dispatcher
	// that dies mid-call leaves its lease and its lost messages for the
	// sweeper to take back, so wherever dispatchers run, one runs.
	Dispatcher bool
	// Sweeper says whether the lease sweeper runs. Default
	// SweeperWithDispatcher.
	Sweeper SweeperRole
	// Reconciler consumes the evidence stream.
	Reconciler bool
	// Notify delivers notifications to the providers file's receivers
	// (notify.Worker), and stores them in the ledger at start so the
	// changes of their tenants write the events they take. Without a
	// process of this role no event is written (none would be
	// delivered).
	Notify bool
}

// SweeperRole says whether a process runs the lease sweeper.
type SweeperRole int

const (
	// SweeperWithDispatcher runs the sweeper in a process with the
	// Dispatcher role and in no other (`actledger serve`).
	SweeperWithDispatcher SweeperRole = iota
	// SweeperAlways runs it without the Dispatcher role too: a test
	// pipeline that starts its dispatchers apart, with App.NewDispatcher.
	SweeperAlways
	// SweeperNever leaves it out. The sweeper works on every tenant of
	// the ledger, so a process that must not touch other deployments'
	// operations (the demo) leaves it out; so does a benchmark, which
	// measures the pipeline without it.
	SweeperNever
)

// RunsSweeper reports whether a process with these roles runs the lease
// sweeper.
func (r Roles) RunsSweeper() bool {
	switch r.Sweeper {
	case SweeperAlways:
		return true
	case SweeperNever:
		return false
	default:
		return r.Dispatcher
	}
}

// Config configures Build. Pool and Registry are required, and one of
// Broker and NATS says where JetStream is. The component configs are
// templates: Build fills the fields it wires (Registry, Providers, Logger,
// metrics callbacks, the ledger and the subjects) and leaves the rest,
// whose zero values are each component's defaults.
type Config struct {
	// Pool is the migrated database; the caller closes it after Stop.
	Pool *pgxpool.Pool
	// Broker is a connected broker the caller closes. When nil, Build
	// connects one with NATS, and App.Close closes it.
	Broker *broker.Broker
	NATS   broker.Config
	// Registry holds the provider contracts.
	Registry *provider.Registry
	// Providers gives provider implementations by name: a program's own
	// supplier adapter, or a test's fake; the others get a provider.HTTP
	// from their config. The providers file still names each one (its
	// account, environment, retry and review policy, idempotency and
	// lookup promises, which decide what follows a lost response).
	Providers map[string]provider.Provider
	Roles     Roles
	// Now is the ledger's clock; nil is the database's and time.Now.
	Now func() time.Time
	// Metrics serves /metrics with the API (to metrics tokens) and counts
	// provider attempts and refused webhooks. The operation counts are
	// folded on a timer (metrics.Folder) either way, never on a scrape.
	Metrics bool
	// Getenv reads the webhook secrets the providers config names, when
	// API.WebhookSecrets is nil. Nil: webhooks have no secrets (404).
	Getenv func(string) string

	// Dispatchers is how many dispatchers run with Roles.Dispatcher.
	// Default DefaultDispatchers.
	Dispatchers int
	Dispatcher  dispatcher.Config
	Sweeper     dispatcher.SweeperConfig
	Reconciler  reconciler.Config
	Relay       relay.Config
	// Notify: ConsoleURL, the retry window and backoff, timeout and
	// concurrency per receiver are taken from here.
	Notify notify.Config
	// ConsoleURL is the console's address as people's browsers reach it
	// (CONSOLE_URL): the sign-in's redirect URL is ConsoleURL +
	// "/oidc/callback". Default Notify.ConsoleURL's.
	ConsoleURL string
	// API: WebhookSecrets, ReadyChecks (default: postgres and nats),
	// MaxBody and RequestTimeout are taken from here.
	API api.Config
	// Auth configures the token store, and so how long a token revoked
	// by another process (`actledger token revoke`) may still
	// authenticate an agent here (auth.Config.CacheTTL).
	Auth auth.Config
	// Retention, when its OlderThan is set, runs a pruner every
	// Retention.Interval in this process (retention.Pruner; one process
	// at a time prunes, by advisory lock). Its Store, Pool and Logger are
	// the app's. Zero: the ledger keeps everything.
	Retention retention.Config
	// StatementCheck is how often the reconciler role looks for a
	// provider whose statement is due (statement.DefaultCheckInterval).
	StatementCheck time.Duration
	Logger         *slog.Logger
	// TracerProvider, when set, traces each operation through the roles
	// of this process (tracing.Setup builds it from OTEL_*): the API's
	// request spans, the enqueue, the relay's publish, the claims,
	// provider calls and results, and the reconciler's applies. Nil: no
	// request spans and nothing exported; the components fall back to
	// otel's global provider, a no-op unless the program set one.
	TracerProvider trace.TracerProvider
}

// withDefaults fills the zero fields with the defaults.
func (cfg Config) withDefaults() Config {
	if cfg.Dispatchers == 0 {
		cfg.Dispatchers = DefaultDispatchers
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	return cfg
}

// validate reports the first unusable field of a config with defaults
// applied, by name.
func (cfg Config) validate() error {
	switch {
	case cfg.Pool == nil:
		return errors.New("app: Config.Pool is required")
	case cfg.Registry == nil:
		return errors.New("app: Config.Registry is required")
	case cfg.Dispatchers < 0:
		return fmt.Errorf("app: Config.Dispatchers %d must not be negative", cfg.Dispatchers)
	case cfg.Roles.Sweeper < SweeperWithDispatcher || cfg.Roles.Sweeper > SweeperNever:
		return fmt.Errorf("app: Config.Roles.Sweeper %d is not a SweeperRole", cfg.Roles.Sweeper)
	}
	return nil
}

// App is one actledger process, built and not yet started.
type App struct {
	Pool     *pgxpool.Pool
	Broker   *broker.Broker
	Registry *provider.Registry
	Store    *ledger.Store
	Tokens   *auth.Tokens
	// Reconciler serves the operator's review methods; it consumes
	// evidence only with Roles.Reconciler.
	Reconciler *reconciler.Reconciler
	// Handler is the HTTP API, with the web console under /console/;
	// nil without Roles.API.
	Handler http.Handler
	// Relay is nil without Roles.Relay.
	Relay *relay.Relay
	// Dispatchers are empty without Roles.Dispatcher.
	Dispatchers []*dispatcher.Dispatcher
	// Notifier delivers notifications; nil without Roles.Notify.
	Notifier *notify.Worker
	// Sweeper is the lease sweeper; nil when the roles run none
	// (Roles.RunsSweeper).
	Sweeper *dispatcher.LeaseSweeper
	// Metrics is nil without Config.Metrics.
	Metrics *metrics.Registry
	// Watcher wakes the API's long polls (one LISTEN connection for the
	// process); nil without Roles.API.
	Watcher *ledger.Watcher
	// Pruner is nil without Config.Retention.
	Pruner *retention.Pruner
	// Statements runs providers' statements (POST /v1/reconciliations);
	// StatementSchedule runs them every reconcile.every, with
	// Roles.Reconciler.
	Statements        *statement.Runner
	StatementSchedule *statement.Scheduler

	cfg         Config
	services    []startstop.Service
	closeBroker bool
}

// Build wires the process cfg describes. Nothing runs until Start; on an
// error, what Build connected is closed again.
func Build(ctx context.Context, cfg Config) (_ *App, err error) {
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	a := &App{Pool: cfg.Pool, Broker: cfg.Broker, Registry: cfg.Registry, cfg: cfg}
	if a.Broker == nil {
		if cfg.NATS.Logger == nil {
			cfg.NATS.Logger = cfg.Logger
		}
		if a.Broker, err = broker.Connect(ctx, cfg.NATS); err != nil {
			return nil, err
		}
		a.closeBroker = true
		defer func() {
			if err != nil {
				a.Broker.Close()
			}
		}()
	}
	// Writers wake relays (in this process and others) after their commit.
	notifier := outbox.NewNotifier(cfg.Pool, cfg.Logger)
	a.services = append(a.services, notifier)
	a.Store = ledger.New(cfg.Pool, ledger.Config{Now: cfg.Now, Subjects: a.Broker, OutboxCommitted: notifier.Signal, TracerProvider: cfg.TracerProvider})
	ac := cfg.Auth
	ac.Logger = cmp.Or(ac.Logger, cfg.Logger)
	if a.Tokens, err = auth.New(cfg.Pool, a.Store, ac); err != nil {
		return nil, err
	}
	if cfg.Metrics {
		a.Metrics = metrics.New(cfg.Pool, cfg.Logger)
	}
	// The console's overview reads the operation counts too, so they are
	// folded with or without /metrics: otherwise their deltas would pile
	// up, and with them what each read of the counts costs.
	folder, err := metrics.NewFolder(cfg.Pool, metrics.FolderConfig{Logger: cfg.Logger})
	if err != nil {
		return nil, err
	}
	a.services = append(a.services, folder)

	rc := cfg.Reconciler
	rc.Registry, rc.Providers, rc.Logger, rc.TracerProvider = cfg.Registry, cfg.Providers, cfg.Logger, cfg.TracerProvider
	if a.Reconciler, err = reconciler.New(a.Store, a.Broker, rc); err != nil {
		return nil, err
	}
	if cfg.Roles.Relay {
		rl := cfg.Relay
		rl.Logger, rl.Now, rl.TracerProvider = cfg.Logger, cfg.Now, cfg.TracerProvider
		if a.Relay, err = relay.New(cfg.Pool, a.Broker.JetStream(), rl); err != nil {
			return nil, err
		}
		notifier.Local(a.Relay.Wake)
		a.services = append(a.services, a.Relay)
	}
	if cfg.Roles.Dispatcher {
		for range cfg.Dispatchers {
			d, err := a.NewDispatcher(cfg.Dispatcher.WorkerID)
			if err != nil {
				return nil, err
			}
			a.Dispatchers = append(a.Dispatchers, d)
			a.services = append(a.services, d)
		}
	}
	if cfg.Roles.RunsSweeper() {
		sc := cfg.Sweeper
		sc.Registry, sc.Logger = cfg.Registry, cfg.Logger
		if a.Metrics != nil {
			sc.OnRequestsExpired = a.Metrics.ApprovalRequestsExpired
		}
		if a.Sweeper, err = dispatcher.NewLeaseSweeper(a.Store, a.Broker, sc); err != nil {
			return nil, err
		}
		a.services = append(a.services, a.Sweeper)
	}
	if a.Statements, err = statement.New(statement.Config{Store: a.Store, Registry: cfg.Registry,
		Reconciler: a.Reconciler, Logger: cfg.Logger}); err != nil {
		return nil, err
	}
	if cfg.Roles.Reconciler {
		a.services = append(a.services, a.Reconciler)
		a.StatementSchedule = statement.NewScheduler(a.Statements, cfg.StatementCheck)
		a.services = append(a.services, a.StatementSchedule)
	}
	// Writers wake the relays after a commit that may have notified.
	a.Store.SetNotifying(len(cfg.Registry.Notifications()) > 0)
	if cfg.Roles.Notify {
		nc := cfg.Notify
		nc.Receivers, nc.Logger = cfg.Registry.Notifications(), cmp.Or(nc.Logger, cfg.Logger)
		if nc.Now == nil {
			nc.Now = cfg.Now
		}
		if a.Notifier, err = notify.New(a.Store, a.Broker, nc); err != nil {
			return nil, err
		}
		a.services = append(a.services, a.Notifier)
	}
	if cfg.Retention.OlderThan > 0 {
		rc := cfg.Retention
		rc.Store, rc.Pool, rc.Logger = a.Store, cfg.Pool, cfg.Logger
		rc.KeyTombstones = max(rc.KeyTombstones, cfg.Registry.LongestIdempotencyRetention())
		if a.Pruner, err = retention.New(rc); err != nil {
			return nil, err
		}
		a.services = append(a.services, a.Pruner)
	}
	if cfg.Roles.API {
		a.Watcher = ledger.NewWatcher(cfg.Pool, cfg.Logger)
		// The token cache serves only while Tokens listens for revocations.
		a.services = append(a.services, a.Watcher, a.Tokens)
		if a.Handler, err = a.newHandler(); err != nil {
			return nil, err
		}
	}
	return a, nil
}

// NewDispatcher builds one more dispatcher wired as Build wires them, with
// workerID (empty: the dispatcher's default). The caller starts and stops
// it; a test uses it to run a fresh process's worker.
func (a *App) NewDispatcher(workerID string) (*dispatcher.Dispatcher, error) {
	dc := a.cfg.Dispatcher
	dc.Registry, dc.Providers, dc.Logger, dc.WorkerID = a.cfg.Registry, a.cfg.Providers, a.cfg.Logger, workerID
	dc.TracerProvider = a.cfg.TracerProvider
	if a.Metrics != nil {
		dc.OnAttempt = a.Metrics.Attempt
	}
	return dispatcher.New(a.Store, a.Broker, dc)
}

// newHandler builds the HTTP API over the app's store, tokens and
// reconciler, for the actions of the registry.
func (a *App) newHandler() (http.Handler, error) {
	ac := a.cfg.API
	ac.Ledger, ac.Tokens, ac.Reconciler, ac.Logger = a.Store, a.Tokens, a.Reconciler, a.cfg.Logger
	ac.Statements = a.Statements
	ac.Registry = a.cfg.Registry
	ac.Watcher = a.Watcher
	ac.TracerProvider = a.cfg.TracerProvider
	if ac.WebhookSecrets == nil && a.cfg.Getenv != nil {
		registry, getenv := a.cfg.Registry, a.cfg.Getenv
		ac.WebhookSecrets = func(name string) ([][]byte, bool) {
			pc, ok := registry.Provider(name)
			if !ok {
				return nil, false
			}
			return pc.WebhookSecretsFrom(getenv), true
		}
	}
	if ac.ReadyChecks == nil {
		ac.ReadyChecks = []api.ReadyCheck{
			{Name: "postgres", Check: a.Pool.Ping},
			{Name: "nats", Check: a.Broker.Ping},
		}
	}
	if a.Metrics != nil {
		ac.OnWebhookRejected = a.Metrics.WebhookRefused
		ac.OnApprovalDecision = a.Metrics.ApprovalDecision
		ac.Metrics = a.Metrics.Handler()
	}
	// POST /mcp calls this same API in process with the caller's token,
	// so the handler it serves is the one being built here.
	var apiHandler http.Handler
	ac.MCP = mcp.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { apiHandler.ServeHTTP(w, r) }),
		mcp.Config{Logger: a.cfg.Logger, TracerProvider: a.cfg.TracerProvider})
	srv, err := api.New(ac)
	if err != nil {
		return nil, err
	}
	apiHandler = srv
	var signIn *sso.SignIn
	if access := a.cfg.Registry.Access(); access != nil {
		// People sign in at the console's address as they reach it, the
		// one notifications link to (CONSOLE_URL).
		signIn, err = sso.New(sso.Config{Access: access, Pool: a.Pool,
			ConsoleURL: cmp.Or(a.cfg.ConsoleURL, a.cfg.Notify.ConsoleURL, notify.DefaultConsoleURL)})
		if err != nil {
			return nil, err
		}
	}
	con, err := console.New(console.Config{API: srv, Ledger: a.Store, Tokens: a.Tokens, Reconciler: a.Reconciler,
		SignIn: signIn, RequestTimeout: ac.RequestTimeout, Logger: a.cfg.Logger})
	if err != nil {
		return nil, err
	}
	// The console shares the API's listener under /console/; every
	// other path is the JSON API's.
	mux := http.NewServeMux()
	mux.Handle("/console/", con)
	mux.Handle("/", srv)
	return mux, nil
}

// Start starts the roles in order (outbox notifier, relay, dispatchers,
// sweeper, reconciler, notification worker). When one fails, those already started are stopped before
// the error returns.
func (a *App) Start(ctx context.Context) error {
	return startstop.StartAll(ctx, a.services...)
}

// Stop stops the roles newest first and waits for them. Safe to call more
// than once; a stopped App may be started again.
func (a *App) Stop() { startstop.StopAll(a.services...) }

// Close stops the roles and closes the broker if Build connected it.
func (a *App) Close() {
	a.Stop()
	if a.closeBroker {
		a.Broker.Close()
	}
}
