package drill

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/actledger/actledger/app"
	"github.com/actledger/actledger/auth"
	"github.com/actledger/actledger/broker"
	"github.com/actledger/actledger/client"
	"github.com/actledger/actledger/dispatcher"
	"github.com/actledger/actledger/localpg"
	"github.com/actledger/actledger/provider"
	"github.com/actledger/actledger/schema"
)

// The scopes of the drill's tokens: the operations are requested in scope drillScope, and a
// token of otherScope (same tenant) must not see them.
const (
	drillScope = "drill"
	otherScope = "drill-elsewhere"
)

// leaseSlack is what the drill's dispatch lease adds to the longest provider timeout: room for
// the call margin and the recording of the answer. A short lease keeps worker_lost short.
const leaseSlack = 3 * time.Second

// pipeline is the process `actledger serve` runs, on a ledger and a JetStream of the drill's own,
// with the fault transport between every provider client and its supplier.
type pipeline struct {
	app     *app.App
	faults  *faults
	lease   time.Duration
	tenant  string
	apiURL  string
	hc      *http.Client
	closers []func()

	agent, approver, operator *client.Client
	// otherTenant and otherScope are agent tokens that must not see the drill's operations.
	otherTenant, otherScope *client.Client
}

func (p *pipeline) onClose(f func()) { p.closers = append(p.closers, f) }

// close stops everything in the reverse order of starting; held answers are let go first, so
// that no worker waits on the drill while it stops.
func (p *pipeline) close() {
	if p.faults != nil {
		p.faults.close()
	}
	for _, f := range slices.Backward(p.closers) {
		f()
	}
	p.closers = nil
}

// startPipeline opens the ledger (a private Postgres unless databaseURL is given), starts an
// embedded JetStream in a temporary directory, builds the app as serve does and serves its API on
// a loopback port.
func startPipeline(ctx context.Context, registry *provider.Registry, databaseURL string, logger *slog.Logger, progress func(string, ...any)) (_ *pipeline, err error) {
	p := &pipeline{faults: newFaults(), hc: &http.Client{Timeout: 30 * time.Second}}
	defer func() {
		if err != nil {
			p.close()
		}
	}()
	pool, err := openLedger(ctx, databaseURL, logger, progress, p.onClose)
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "actledger-drill-nats-")
	if err != nil {
		return nil, fmt.Errorf("temporary directory for JetStream: %w", err)
	}
	p.onClose(func() { _ = os.RemoveAll(dir) })

	overrides := make(map[string]provider.Provider)
	var longest time.Duration
	for _, pc := range registry.Providers() {
		overrides[pc.Name] = provider.NewHTTP(pc, provider.HTTPOptions{Wrap: p.faults.wrap})
		longest = max(longest, pc.Timeout.Duration) // a registry's config has its default filled
	}
	p.lease = longest + leaseSlack
	for _, pc := range registry.Providers() {
		// A timeout the file leaves out is shortened by the dispatcher to half its lease,
		// while the provider client the drill gives it keeps the full one: a lease twice the
		// timeout leaves it whole, so the ledger's rule for a call's end is the call's.
		if t, err := pc.DispatchTimeout(p.lease); err == nil && t < pc.Timeout.Duration {
			p.lease = max(p.lease, 2*pc.Timeout.Duration)
		}
	}
	a, err := app.Build(ctx, app.Config{
		Pool: pool,
		NATS: broker.Config{
			DataDir: dir, Prefix: "DRILL" + rand.Text()[:8], Name: "actledger-drill",
			// A throwaway server: its warnings about durability below production's would only
			// confuse.
			Logger: slog.New(levelHandler{Handler: logger.Handler(), min: slog.LevelError}),
		},
		Registry:  registry,
		Providers: overrides,
		// Two dispatchers, as two processes: worker_lost needs another worker to take over.
		Roles:       app.Roles{API: true, Relay: true, Dispatcher: true, Reconciler: true},
		Dispatchers: 2,
		Dispatcher:  dispatcher.Config{Concurrency: 4, LeaseDuration: p.lease},
		Logger:      logger,
	})
	if err != nil {
		return nil, err
	}
	p.app = a
	p.onClose(a.Close)

	p.tenant = "drill-" + strings.ToLower(rand.Text()[:8])
	tok := func(tenant string, role auth.Role, scope string) (string, error) {
		var c auth.Created
		var err error
		if scope == "" {
			c, err = a.Tokens.Create(ctx, tenant, role, "")
		} else {
			c, err = a.Tokens.CreateScoped(ctx, tenant, role, "", scope)
		}
		return c.Secret, err
	}
	secrets := make([]string, 5)
	for i, t := range []struct {
		tenant string
		role   auth.Role
		scope  string
	}{
		{p.tenant, auth.RoleAgent, drillScope},
		{p.tenant, auth.RoleApprover, drillScope},
		{p.tenant, auth.RoleOperator, ""},
		{p.tenant + "-other", auth.RoleAgent, ""},
		{p.tenant, auth.RoleAgent, otherScope},
	} {
		if secrets[i], err = tok(t.tenant, t.role, t.scope); err != nil {
			return nil, fmt.Errorf("drill token: %w", err)
		}
	}
	if err := a.Start(ctx); err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("listen for the drill's API: %w", err)
	}
	srv := &http.Server{Handler: a.Handler, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	p.onClose(func() {
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
	})
	p.onClose(p.hc.CloseIdleConnections)
	p.apiURL = "http://" + ln.Addr().String()
	opts := client.Options{HTTPClient: p.hc, UserAgent: "actledger-drill"}
	p.agent = client.New(p.apiURL, secrets[0], opts)
	p.approver = client.New(p.apiURL, secrets[1], opts)
	p.operator = client.New(p.apiURL, secrets[2], opts)
	p.otherTenant = client.New(p.apiURL, secrets[3], opts)
	p.otherScope = client.New(p.apiURL, secrets[4], opts)
	return p, nil
}

// operationsAny tells whether a database already holds operations.
const operationsAny = `SELECT EXISTS (SELECT 1 FROM operations)`

// openLedger connects to databaseURL, or starts a private cluster from the local PostgreSQL
// binaries in a temporary directory (removed by the closer it registers), and migrates it. A
// given database must hold no operations: the drill's lease sweeper works on every operation
// of its ledger, and would send another deployment's to the drill's faults.
func openLedger(ctx context.Context, databaseURL string, logger *slog.Logger, progress func(string, ...any), onClose func(func())) (*pgxpool.Pool, error) {
	if databaseURL == "" {
		dir, err := os.MkdirTemp("", "actledger-drill-pg-")
		if err != nil {
			return nil, fmt.Errorf("temporary directory for Postgres: %w", err)
		}
		onClose(func() { _ = os.RemoveAll(dir) })
		port, err := freePort()
		if err != nil {
			return nil, err
		}
		progress("starting a private Postgres from the local binaries (port %s)", port)
		c, err := localpg.StartPrivate(ctx, dir, port, logger)
		if err != nil {
			return nil, fmt.Errorf("a private Postgres could not be started (%w); give --database-url of an empty database instead", err)
		}
		onClose(c.Stop)
		databaseURL = c.URL("postgres")
	}
	cfg, err := pgxpool.ParseConfig(databaseURL)
	if err != nil {
		return nil, fmt.Errorf("--database-url: %w", err)
	}
	cfg.MaxConns = max(cfg.MaxConns, 32)
	schema.ConfigurePool(cfg)
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("connect to Postgres: %w", err)
	}
	onClose(pool.Close)
	if err := pool.Ping(ctx); err != nil {
		return nil, fmt.Errorf("connect to Postgres at %s:%d: %w", cfg.ConnConfig.Host, cfg.ConnConfig.Port, err)
	}
	if _, err := schema.Migrate(ctx, pool, logger); err != nil {
		return nil, err
	}
	var any bool
	if err := pool.QueryRow(ctx, operationsAny).Scan(&any); err != nil {
		return nil, err
	}
	if any {
		return nil, ErrLedgerInUse
	}
	return pool, nil
}

// ErrLedgerInUse: the database given holds operations already.
var ErrLedgerInUse = errors.New("the database holds operations already: a drill needs a ledger of its own (its lease sweeper works on every operation in it); give an empty database, or leave --database-url out for a private one")

// freePort is a TCP port of the loopback interface nothing listens on right now.
func freePort() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", fmt.Errorf("find a free port: %w", err)
	}
	defer ln.Close()
	return strconv.Itoa(ln.Addr().(*net.TCPAddr).Port), nil
}

// levelHandler drops records below min.
type levelHandler struct {
	slog.Handler
	min slog.Level
}

func (h levelHandler) Enabled(ctx context.Context, level slog.Level) bool {
	return level >= h.min && h.Handler.Enabled(ctx, level)
}

func (h levelHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	return levelHandler{Handler: h.Handler.WithAttrs(attrs), min: h.min}
}

func (h levelHandler) WithGroup(name string) slog.Handler {
	return levelHandler{Handler: h.Handler.WithGroup(name), min: h.min}
}
