// Command smtpmail is a program that embeds actledger with a supplier of
// its own: email sent by SMTP (Mailer), under the provider name "mail" of
// its providers file. Everything else is actledger as `actledger serve`
// runs it: the HTTP API (and MCP, console), the outbox relay, dispatchers
// and the reconciler, on Postgres and JetStream.
//
//	DATABASE_URL=postgres://postgres@127.0.0.1:5432/postgres NATS_URL=nats://127.0.0.1:4222 \
//	SMTP_ADDR=127.0.0.1:2525 go run ./examples/smtpmail
//
// then create a token (`actledger token create --tenant acme-corp --role
// agent`) and propose `email.send` with {"to", "subject", "text"}.
package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/actledger/actledger/app"
	"github.com/actledger/actledger/broker"
	"github.com/actledger/actledger/provider"
	"github.com/actledger/actledger/schema"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	logger := slog.New(slog.NewTextHandler(os.Stderr, nil))
	if err := run(ctx, logger); err != nil {
		fmt.Fprintln(os.Stderr, "smtpmail:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, logger *slog.Logger) error {
	registry, err := provider.Load(cmp.Or(os.Getenv("PROVIDERS_FILE"), "examples/smtpmail/providers.yaml"))
	if err != nil {
		return err
	}
	pool, err := pgxpool.New(ctx, os.Getenv("DATABASE_URL"))
	if err != nil {
		return err
	}
	defer pool.Close()
	if _, err := schema.Migrate(ctx, pool, logger); err != nil {
		return err
	}
	a, err := app.Build(ctx, app.Config{
		Pool: pool, NATS: broker.Config{URL: os.Getenv("NATS_URL")}, Registry: registry,
		Providers: Providers(cmp.Or(os.Getenv("SMTP_ADDR"), "127.0.0.1:25")),
		Roles:     app.Roles{API: true, Relay: true, Dispatcher: true, Reconciler: true},
		Getenv:    os.Getenv, Logger: logger,
	})
	if err != nil {
		return err
	}
	defer a.Close()
	if err := a.Start(ctx); err != nil {
		return err
	}
	defer a.Stop()
	srv := &http.Server{Addr: cmp.Or(os.Getenv("LISTEN_ADDR"), "127.0.0.1:8080"), Handler: a.Handler, ReadHeaderTimeout: 5 * time.Second}
	go func() {
		<-ctx.Done()
		_ = srv.Shutdown(context.WithoutCancel(ctx))
	}()
	if err := srv.ListenAndServe(); !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// Providers are the program's own supplier implementations, by the
// provider names of its providers file.
func Providers(smtpAddr string) map[string]provider.Provider {
	return map[string]provider.Provider{
		"mail": &Mailer{Addr: smtpAddr, From: "support@acme.example", Timeout: 10 * time.Second},
	}
}
