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

	"go.opentelemetry.io/otel/trace"

	"github.com/actledger/actledger/api"
	"github.com/actledger/actledger/app"
	"github.com/actledger/actledger/auth"
	"github.com/actledger/actledger/broker"
	"github.com/actledger/actledger/dispatcher"
	"github.com/actledger/actledger/notify"
	"github.com/actledger/actledger/provider"
	"github.com/actledger/actledger/reconciler"
	"github.com/actledger/actledger/tracing"
)

// allRoles are the roles `serve` runs by default, in start order.
var allRoles = []string{"api", "relay", "dispatcher", "reconciler", "notify"}

func serve(ctx context.Context, e env, args []string, logger *slog.Logger) error {
	fs := newFlagSet("serve", io.Discard)
	rolesFlag := fs.String("roles", strings.Join(allRoles, ","), "comma-separated roles to run: "+strings.Join(allRoles, ","))
	providersFlag := fs.String("providers", e.ProvidersFile, "providers config file (YAML or JSON); default $PROVIDERS_FILE")
	if err := fs.Parse(args); err != nil {
		return fmt.Errorf("%v: %w", err, errUsage)
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("serve takes only flags, got %q: %w", fs.Args(), errUsage)
	}
	roles, err := parseRoles(*rolesFlag)
	if err != nil {
		return err
	}
	if *providersFlag == "" {
		return errors.New("no providers config: set PROVIDERS_FILE or --providers (`make run` uses demo/providers.yaml)")
	}
	registry, err := provider.LoadEnv(*providersFlag, e.Getenv)
	if err != nil {
		return err
	}
	warnPublishedWebhookSecrets(registry, e.Getenv, logger)

	tracerProvider, stopTracing, err := setupTracing(ctx, e.Getenv, logger)
	if err != nil {
		return err
	}
	// Deferred first, so it runs last: the spans of the work the roles
	// finish while stopping are exported too.
	defer stopTracing()

	pool, stopDB, err := openDatabase(ctx, e, logger)
	if err != nil {
		return err
	}
	defer stopDB()
	repl, err := readReplication(ctx, pool)
	if err != nil {
		return err
	}
	warnWithoutSynchronousStandby(repl, logger)

	a, err := app.Build(ctx, app.Config{
		Pool: pool,
		NATS: broker.Config{
			URL: e.NATSURL, DataDir: e.NATSDataDir, Prefix: e.StreamPrefix, Replicas: e.StreamReplicas,
			CredsFile: e.NATSCreds, User: e.NATSUser, Password: e.NATSPassword, NkeyFile: e.NATSNkey, CAFile: e.NATSCA,
		},
		Registry: registry,
		Roles: app.Roles{
			API:        slices.Contains(roles, "api"),
			Relay:      slices.Contains(roles, "relay"),
			Dispatcher: slices.Contains(roles, "dispatcher"),
			Reconciler: slices.Contains(roles, "reconciler"),
			Notify:     slices.Contains(roles, "notify"),
		},
		Metrics:    true,
		Getenv:     e.Getenv,
		Dispatcher: dispatcher.Config{LeaseDuration: e.LeaseDuration, Concurrency: e.DispatchConcurrency},
		Reconciler: reconciler.Config{UnappliedAfter: e.EvidenceUnappliedAfter},
		Notify: notify.Config{ConsoleURL: e.consoleURL(), Timeout: e.NotifyTimeout, RetryFor: e.NotifyRetryFor,
			Concurrency: e.NotifyConcurrency},
		Auth:           auth.Config{CacheTTL: e.TokenCacheTTL},
		API:            api.Config{MCPAllowedOrigins: e.MCPAllowedOrigins, MCPAllowedHosts: e.MCPAllowedHosts},
		Retention:      e.Retention,
		Logger:         logger,
		TracerProvider: tracerProvider,
	})
	if err != nil {
		return err
	}
	defer a.Close()
	logger.Info("connected to JetStream", "embedded", a.Broker.Embedded(), "server_version", a.Broker.ServerVersion(), "prefix", a.Broker.Prefix())
	// A failed start stops what already started; Close stops the rest.
	if err := a.Start(ctx); err != nil {
		return err
	}

	if a.Handler == nil {
		logger.Info("actledger running", "roles", roles)
		<-ctx.Done()
		logger.Info("shutting down")
		return nil
	}
	return listenAndServe(ctx, e.ListenAddr, a.Handler, logger, roles)
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

// setupTracing builds the tracer provider the OTEL_* variables ask for
// (tracing.Setup): nil, and nothing exported, without an OTLP endpoint.
// stop flushes the spans still batched, for at most five seconds.
func setupTracing(ctx context.Context, getenv func(string) string, logger *slog.Logger) (_ trace.TracerProvider, stop func(), err error) {
	tp, shutdown, err := tracing.Setup(ctx, getenv)
	if err != nil {
		return nil, nil, err
	}
	stop = func() {
		flushCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		if err := shutdown(flushCtx); err != nil {
			logger.Warn("tracing: spans not exported at shutdown", "err", err)
		}
	}
	if tp == nil {
		return nil, stop, nil // a nil *TracerProvider in the interface would not be nil
	}
	logger.Info("exporting traces over OTLP/HTTP")
	return tp, stop, nil
}
