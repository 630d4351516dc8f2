// Command mocksupplier serves the fault-injecting mock supplier ("acme") for demos, tests and
// benchmarks. It is a test double: never point a production actledger at it.
//
//	mocksupplier [--addr 127.0.0.1:9100] [--idempotency honour|ignore] [--lookup-lag 2s]
//	             [--webhook-url URL] [--webhook-delay 0s] [--data FILE] [--log-level info]
//
// With --data FILE the orders and the answers stored under Idempotency-Keys are kept in FILE
// (created if missing; an append-only log, each order fsynced before any answer), so a restarted
// supplier still knows every order it made, answers a repeated key from the stored answer, and
// still reports how many orders really exist. A file it cannot read in full stops it at start,
// naming the file. Without --data everything is in memory and gone at exit. Faults, recorded
// requests and settings changed through the admin API are never kept.
//
// The webhook signing secret comes from ACME_WEBHOOK_SECRET, never from a flag, so it stays out
// of process listings and shell history. Faults and everything else are set at run time through
// the admin API (see package mocksupplier). SIGINT or SIGTERM shuts it down gracefully.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/actledger/actledger/internal/mocksupplier"
)

// shutdownGrace bounds how long in-flight requests (a delay fault, say) may finish at shutdown.
const shutdownGrace = 5 * time.Second

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Getenv, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "mocksupplier:", err)
		os.Exit(1)
	}
}

// options are the parsed command line and environment.
type options struct {
	addr     string
	cfg      mocksupplier.Config
	logLevel slog.Level
}

func parseOptions(args []string, getenv func(string) string, stderr io.Writer) (options, error) {
	fs := flag.NewFlagSet("mocksupplier", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var (
		o            options
		mode         string
		webhookURL   string
		webhookDelay time.Duration
		level        string
	)
	fs.StringVar(&o.addr, "addr", "127.0.0.1:9100", "listen address (the admin API has no authentication: keep it on loopback)")
	fs.StringVar(&mode, "idempotency", string(mocksupplier.Honour), "honour or ignore Idempotency-Key headers")
	fs.DurationVar(&o.cfg.LookupLag, "lookup-lag", 2*time.Second, "how long a new order stays hidden from lookups by client_reference")
	fs.StringVar(&webhookURL, "webhook-url", "", "where to POST signed order.created events (empty: no webhooks); secret from ACME_WEBHOOK_SECRET")
	fs.DurationVar(&webhookDelay, "webhook-delay", 0, "how long after an order its webhook is sent")
	fs.StringVar(&o.cfg.DataFile, "data", "", "file that keeps orders and idempotency keys across restarts (empty: in memory only)")
	fs.StringVar(&level, "log-level", "info", "debug, info, warn or error (debug logs every order)")
	if err := fs.Parse(args); err != nil {
		return options{}, err
	}
	if fs.NArg() > 0 {
		return options{}, fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	switch m := mocksupplier.Mode(mode); m {
	case mocksupplier.Honour, mocksupplier.Ignore:
		o.cfg.Idempotency = m
	default:
		return options{}, fmt.Errorf("--idempotency must be %q or %q, got %q", mocksupplier.Honour, mocksupplier.Ignore, mode)
	}
	if o.cfg.LookupLag < 0 || webhookDelay < 0 {
		return options{}, errors.New("--lookup-lag and --webhook-delay must not be negative")
	}
	if err := o.logLevel.UnmarshalText([]byte(level)); err != nil {
		return options{}, fmt.Errorf("--log-level: %w", err)
	}
	if webhookURL != "" {
		u, err := url.Parse(webhookURL)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return options{}, fmt.Errorf("--webhook-url must be an absolute http(s) URL, got %q", webhookURL)
		}
		o.cfg.Webhook = &mocksupplier.WebhookConfig{
			URL:    webhookURL,
			Secret: getenv("ACME_WEBHOOK_SECRET"),
			Delay:  webhookDelay,
		}
	}
	return o, nil
}

// run parses the options, listens and serves until ctx ends.
func run(ctx context.Context, args []string, getenv func(string) string, stderr io.Writer) error {
	o, err := parseOptions(args, getenv, stderr)
	if err != nil {
		return err
	}
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: o.logLevel}))
	o.cfg.Logger = log
	sup, err := mocksupplier.Open(o.cfg)
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", o.addr)
	if err != nil {
		sup.Close()
		return fmt.Errorf("listening on %s: %w", o.addr, err)
	}
	attrs := []any{"addr", ln.Addr().String(), "idempotency", string(o.cfg.Idempotency), "lookup_lag", o.cfg.LookupLag}
	if o.cfg.DataFile != "" {
		attrs = append(attrs, "data_file", o.cfg.DataFile, "orders_loaded", sup.TotalOrders())
	}
	if wh := o.cfg.Webhook; wh != nil {
		attrs = append(attrs, "webhook_url", wh.URL, "webhook_delay", wh.Delay, "webhook_signed", wh.Secret != "")
		if wh.Secret == "" {
			log.WarnContext(ctx, "ACME_WEBHOOK_SECRET is empty: webhooks are signed with an empty key")
		}
	}
	log.InfoContext(ctx, "mock supplier listening", attrs...)
	return serve(ctx, ln, sup, log)
}

// serve answers on ln until ctx ends, then lets in-flight requests finish (within
// shutdownGrace) and stops pending webhooks.
func serve(ctx context.Context, ln net.Listener, sup *mocksupplier.Server, log *slog.Logger) error {
	defer sup.Close()
	srv := &http.Server{
		Handler:           sup,
		ReadHeaderTimeout: 10 * time.Second,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
	}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return fmt.Errorf("serving: %w", err)
	case <-ctx.Done():
	}
	log.InfoContext(ctx, "shutting down")
	shutdownCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), shutdownGrace)
	defer cancel()
	if err := srv.Shutdown(shutdownCtx); err != nil {
		return fmt.Errorf("shutting down: %w", err)
	}
	if err := <-errc; !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("serving: %w", err)
	}
	return nil
}
