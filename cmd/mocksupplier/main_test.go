package main

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/actledger/actledger/internal/mocksupplier"
)

func TestParseOptions(t *testing.T) {
	t.Parallel()
	env := func(secret string) func(string) string {
		return func(name string) string {
			if name == "ACME_WEBHOOK_SECRET" {
				return secret
			}
			return ""
		}
	}
	tests := []struct {
		name    string
		args    []string
		secret  string
		wantErr string
		check   func(t *testing.T, o options)
	}{
		{
			name: "defaults",
			check: func(t *testing.T, o options) {
				if o.addr != "127.0.0.1:9100" || o.cfg.Idempotency != mocksupplier.Honour ||
					o.cfg.LookupLag != 2*time.Second || o.cfg.Webhook != nil || o.logLevel != slog.LevelInfo || o.cfg.DataFile != "" {
					t.Errorf("defaults = %+v", o)
				}
			},
		},
		{
			name:   "everything set, secret from the environment",
			args:   []string{"--addr", ":0", "--idempotency", "ignore", "--lookup-lag", "0s", "--webhook-url", "http://127.0.0.1:8080/v1/webhooks/acme", "--webhook-delay", "3s", "--data", "data/orders.jsonl", "--log-level", "debug"},
			secret: "whsec_x",
			check: func(t *testing.T, o options) {
				wh := o.cfg.Webhook
				if o.addr != ":0" || o.cfg.Idempotency != mocksupplier.Ignore || o.cfg.LookupLag != 0 || o.logLevel != slog.LevelDebug || o.cfg.DataFile != "data/orders.jsonl" ||
					wh == nil || wh.URL != "http://127.0.0.1:8080/v1/webhooks/acme" || wh.Secret != "whsec_x" || wh.Delay != 3*time.Second {
					t.Errorf("options = %+v, webhook %+v", o, wh)
				}
			},
		},
		{name: "unknown mode", args: []string{"--idempotency", "maybe"}, wantErr: "--idempotency"},
		{name: "secret is not a flag", args: []string{"--webhook-secret", "x"}, wantErr: "not defined"},
		{name: "relative webhook url", args: []string{"--webhook-url", "/hook"}, wantErr: "--webhook-url"},
		{name: "negative lag", args: []string{"--lookup-lag", "-1s"}, wantErr: "negative"},
		{name: "bad log level", args: []string{"--log-level", "loud"}, wantErr: "--log-level"},
		{name: "stray argument", args: []string{"serve"}, wantErr: "unexpected"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			o, err := parseOptions(tt.args, env(tt.secret), io.Discard)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want one mentioning %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("err = %v", err)
			}
			tt.check(t, o)
		})
	}
}

func TestServeAnswersUntilContextEnds(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var logs bytes.Buffer
	done := make(chan error, 1)
	go func() {
		done <- serve(ctx, ln, mocksupplier.New(mocksupplier.Config{}), slog.New(slog.NewTextHandler(&logs, nil)))
	}()

	resp, err := http.Post("http://"+ln.Addr().String()+"/v1/orders", "application/json", strings.NewReader(`{"client_reference":"po-1"}`))
	if err != nil {
		t.Fatalf("POST /v1/orders: %v", err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusCreated {
		t.Errorf("POST /v1/orders: status %d, want 201", resp.StatusCode)
	}

	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("serve returned %v, want nil after a graceful shutdown", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("serve did not return after the context ended")
	}
	if _, err := net.DialTimeout("tcp", ln.Addr().String(), time.Second); err == nil {
		t.Error("still accepting connections after shutdown")
	}
}

func TestRunNeverLogsTheWebhookSecret(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	cancel() // serve shuts down at once; the start-up line is what is checked
	var logs bytes.Buffer
	getenv := func(string) string { return "whsec_do_not_print" }

	err := run(ctx, []string{"--addr", "127.0.0.1:0", "--webhook-url", "http://127.0.0.1:1/hook"}, getenv, &logs)

	if err != nil {
		t.Fatalf("run: %v", err)
	}
	if !strings.Contains(logs.String(), "webhook_signed=true") {
		t.Errorf("start-up log does not say webhooks are signed:\n%s", logs.String())
	}
	if strings.Contains(logs.String(), "whsec_do_not_print") {
		t.Errorf("the secret was logged:\n%s", logs.String())
	}
}
