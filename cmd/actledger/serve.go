package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/actledger/actledger/api"
	"github.com/actledger/actledger/auth"
	"github.com/actledger/actledger/broker"
	"github.com/actledger/actledger/dispatcher"
	"github.com/actledger/actledger/ledger"
	"github.com/actledger/actledger/metrics"
	"github.com/actledger/actledger/outbox"
	"github.com/actledger/actledger/provider"
	"github.com/actledger/actledger/reconciler"
)

// allRoles are the roles `serve` runs by default, in start order.
var allRoles = []string{"api", "relay", "dispatcher", "reconciler"}

// startStopper is the contract every long-running component shares.
type startStopper interface {
	Start(ctx context.Context) error
	Stop()
}

func serve(ctx context.Context, e env, args []string, logger *slog.Logger) error {
	fs := newFlagSet("serve", io.Discard)
	rolesFlag := fs.String("roles", strings.Join(allRoles, ","), "comma-separated roles to run: "+strings.Join(allRoles, ","))
	providersFlag := fs.String("providers", e.ProvidersFile, "providers config file (YAML or JSON); default $PROVIDERS_FILE")
	if err := fs.Parse(args); err != nil {
		return fmt.Errorf("%v: %w", err, errUsage)
	}
	roles, err := parseRoles(*rolesFlag)
	if err != nil {
		return err
	}
	if e.badLease != "" {
		return fmt.Errorf("LEASE_DURATION=%q is not a positive duration such as 30s", e.badLease)
	}
	if len(e.badDurations) > 0 {
		return fmt.Errorf("%s: not a positive duration such as 30s", strings.Join(e.badDurations, ", "))
	}
	if *providersFlag == "" {
		return errors.New("no providers config: set PROVIDERS_FILE or --providers (`make run` uses demo/providers.yaml)")
	}
	registry, err := provider.Load(*providersFlag)
	if err != nil {
		return err
	}

	pool, stopDB, err := openDatabase(ctx, e, logger)
	if err != nil {
		return err
	}
	defer stopDB()

	b, err := broker.Connect(ctx, broker.Config{
		URL: e.NATSURL, DataDir: e.NATSDataDir, Prefix: e.StreamPrefix, Replicas: e.StreamReplicas, Logger: logger,
		CredsFile: e.NATSCreds, User: e.NATSUser, Password: e.NATSPassword, NkeyFile: e.NATSNkey, CAFile: e.NATSCA,
	})
	if err != nil {
		return err
	}
	defer b.Close()
	logger.Info("connected to JetStream", "embedded", b.Embedded(), "server_version", b.ServerVersion(), "prefix", b.Prefix())

	notifier := outbox.NewNotifier(pool, logger)
	store := ledger.New(pool, ledger.Config{ReviewSubjectPrefix: b.ReviewSubjectPrefix(), OutboxCommitted: notifier.Signal})
	metricsRegistry := metrics.New(pool, logger)
	rec, err := reconciler.New(store, b, reconciler.Config{Registry: registry, UnappliedAfter: e.EvidenceUnappliedAfter, Logger: logger})
	if err != nil {
		return err
	}
	components := []startStopper{notifier}
	if slices.Contains(roles, "relay") {
		components = append(components, outbox.NewRelay(pool, b.JetStream(), outbox.Config{Logger: logger}))
	}
	if slices.Contains(roles, "dispatcher") {
		d, err := dispatcher.New(store, b, dispatcher.Config{
			Registry: registry, LeaseDuration: e.LeaseDuration, Concurrency: e.DispatchConcurrency,
			OnAttempt: metricsRegistry.Attempt, Logger: logger,
		})
		if err != nil {
			return err
		}
		components = append(components, d, dispatcher.NewLeaseSweeper(store, b, dispatcher.SweeperConfig{Registry: registry, Logger: logger}))
	}
	if slices.Contains(roles, "reconciler") {
		components = append(components, rec)
	}
	// One LISTEN connection wakes every long-polling reader of this process.
	watcher := ledger.NewWatcher(pool, logger)
	if slices.Contains(roles, "api") {
		components = append(components, watcher)
	}
	for _, c := range components {
		if err := c.Start(ctx); err != nil {
			return err
		}
	}
	defer func() {
		for _, c := range slices.Backward(components) {
			c.Stop()
		}
	}()

	if !slices.Contains(roles, "api") {
		logger.Info("actledger running", "roles", roles)
		<-ctx.Done()
		logger.Info("shutting down")
		return nil
	}
	actions := make(map[string]string)
	for _, a := range registry.Actions() {
		cfg, _ := registry.ForAction(a)
		actions[a] = cfg.Name
	}
	handler := api.New(api.Config{
		Ledger:          store,
		Tokens:          auth.New(pool, store),
		Actions:         actions,
		Targets:         api.TargetsOf(registry.Providers()),
		DispatchSubject: b.DispatchSubject,
		EvidenceSubject: b.EvidenceSubject,
		WebhookSecrets: func(name string) ([][]byte, bool) {
			pc, ok := registry.Provider(name)
			if !ok {
				return nil, false
			}
			return pc.WebhookSecretsFrom(e.Getenv), true
		},
		Reconciler: rec,
		Watcher:    watcher,
		ReadyChecks: []api.ReadyCheck{
			{Name: "postgres", Check: pool.Ping},
			{Name: "nats", Check: b.Ping},
		},
		OnWebhookRejected: metricsRegistry.WebhookRefused,
		Metrics:           metricsRegistry.Handler(),
		Logger:            logger,
	})
	return listenAndServe(ctx, e.ListenAddr, handler, logger, roles)
}

// listenAndServe serves until ctx ends, then stops taking new requests and
// lets the ones in flight finish.
func listenAndServe(ctx context.Context, addr string, h http.Handler, logger *slog.Logger, roles []string) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("listen on %s (LISTEN_ADDR): %w", addr, err)
	}
	srv := api.NewHTTPServer(h, api.HTTPLimits{})
	if d, ok := h.(interface{ Drain() }); ok {
		// Long polls answer at once when shutting down, instead of
		// holding the shutdown for their wait.
		srv.RegisterOnShutdown(d.Drain)
	}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	logger.Info("actledger running", "roles", roles, "listen", ln.Addr().String())
	select {
	case err := <-errc:
		return fmt.Errorf("http server: %w", err)
	case <-ctx.Done():
	}
	logger.Info("shutting down: finishing requests in flight")
	shutdownCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	return srv.Shutdown(shutdownCtx)
}

func parseRoles(s string) ([]string, error) {
	var roles []string
	for _, r := range strings.Split(s, ",") {
		r = strings.TrimSpace(r)
		if r == "" {
			continue
		}
		if !slices.Contains(allRoles, r) {
			return nil, fmt.Errorf("unknown role %q; roles are %s", r, strings.Join(allRoles, ","))
		}
		roles = append(roles, r)
	}
	if len(roles) == 0 {
		return nil, fmt.Errorf("--roles is empty; roles are %s", strings.Join(allRoles, ","))
	}
	return roles, nil
}
