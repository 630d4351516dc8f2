package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/actledger/actledger/broker"
	"github.com/actledger/actledger/internal/mocksupplier"
	"github.com/actledger/actledger/internal/testdb"
	"github.com/actledger/actledger/internal/testnats"
	"github.com/actledger/actledger/internal/testpipeline"
	"github.com/actledger/actledger/internal/testpoll"
	"github.com/actledger/actledger/ledger"
)

// instance is one `actledger serve` run in-process against the test
// Postgres, the test NATS server and an in-process mock supplier.
type instance struct {
	base     string
	supplier *mocksupplier.Server
	// traceparents are the traceparent headers of the creates the
	// supplier received (serve also reads its statement, on schedule).
	traceparents *testpipeline.HeaderLog
	prefix       string
	getenv       func(string) string
	stop         func()
}

func startServe(t *testing.T) *instance {
	t.Helper()
	return startServeWith(t, nil)
}

// startServeWith is startServe with the providers config rewritten by edit
// (nil: the demo's, pointed at the mock supplier).
func startServeWith(t *testing.T, edit func(providersYAML string) string) *instance {
	t.Helper()
	return startPrepared(t, prepareServe(t, edit))
}

// startPrepared runs `serve` for in (prepareServe) until the test ends.
func startPrepared(t *testing.T, in *instance) *instance {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	served := make(chan error, 1)
	go func() { served <- run(ctx, []string{"serve"}, in.getenv, io.Discard, io.Discard) }()
	waitReady(t, in.base, served)
	in.stop = func() {
		cancel()
		select {
		case err := <-served:
			if err != nil {
				t.Errorf("serve returned %v after SIGTERM-equivalent, want nil", err)
			}
		case <-time.After(30 * time.Second):
			t.Fatal("serve did not shut down")
		}
	}
	t.Cleanup(func() {
		if ctx.Err() == nil {
			in.stop()
		}
	})
	return in
}

// prepareServe makes everything `serve` needs for t (database, streams,
// supplier, providers file, environment) without starting it.
func prepareServe(t *testing.T, edit func(providersYAML string) string) *instance {
	t.Helper()
	return prepareServeSupplier(t, edit, mocksupplier.Honour)
}

// prepareServeSupplier is prepareServe with a supplier that treats
// idempotency keys as mode says.
func prepareServeSupplier(t *testing.T, edit func(providersYAML string) string, mode mocksupplier.Mode) *instance {
	t.Helper()
	_, dbURL := testdb.NewWithURL(t)
	testnats.Anchor(t)
	supplier := mocksupplier.New(mocksupplier.Config{Idempotency: mode, LookupLag: 100 * time.Millisecond, Logger: slog.New(slog.DiscardHandler)})
	traceparents := &testpipeline.HeaderLog{Name: "traceparent", Path: "/v1/orders"}
	srv := httptest.NewServer(traceparents.Handler(supplier))
	t.Cleanup(func() { srv.Close(); supplier.Close() })
	demo, err := os.ReadFile("../../demo/providers.yaml")
	if err != nil {
		t.Fatal(err)
	}
	providers := filepath.Join(t.TempDir(), "providers.yaml")
	cfg := strings.Replace(string(demo), "http://127.0.0.1:9100", srv.URL, 1)
	cfg = strings.Replace(cfg, "visibility_lag: 2s", "visibility_lag: 100ms", 1)
	if edit != nil {
		cfg = edit(cfg)
	}
	if err := os.WriteFile(providers, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	in := &instance{supplier: supplier, traceparents: traceparents, prefix: testnats.Prefix()}
	addr := freeAddr(t)
	vars := map[string]string{
		"DATABASE_URL":        dbURL,
		"NATS_URL":            testnats.URL(),
		"STREAM_PREFIX":       in.prefix,
		"LISTEN_ADDR":         addr,
		"PROVIDERS_FILE":      providers,
		"LEASE_DURATION":      "5s",
		"ACME_WEBHOOK_SECRET": "whsec-serve-test",
	}
	in.getenv = func(k string) string { return vars[k] }
	t.Cleanup(func() {
		b, err := broker.Connect(context.Background(), broker.Config{URL: testnats.URL(), Prefix: in.prefix})
		if err == nil {
			_ = b.DeleteStreams(context.Background())
			b.Close()
		}
	})
	in.base = "http://" + addr
	return in
}

func (in *instance) token(t *testing.T, role string) string {
	t.Helper()
	var out bytes.Buffer
	if err := run(t.Context(), []string{"token", "create", "--tenant", "demo", "--role", role}, in.getenv, &out, io.Discard); err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(out.String())
}

// ops runs `actledger ops args...` against the instance with token.
func (in *instance) ops(t *testing.T, token string, args ...string) string {
	t.Helper()
	return in.command(t, "ops", token, args...)
}

// clientEnv is the environment of a command that reaches the instance
// over HTTP with token.
func (in *instance) clientEnv(token string) func(string) string {
	return func(k string) string {
		switch k {
		case "ACTLEDGER_URL":
			return in.base
		case "ACTLEDGER_TOKEN":
			return token
		}
		return ""
	}
}

// command runs `actledger name args...`, a command that reaches the
// instance over HTTP (ACTLEDGER_URL) with token (ACTLEDGER_TOKEN).
func (in *instance) command(t *testing.T, name, token string, args ...string) string {
	t.Helper()
	var out bytes.Buffer
	if err := run(t.Context(), append([]string{name}, args...), in.clientEnv(token), &out, io.Discard); err != nil {
		t.Fatalf("%s %v: %v", name, args, err)
	}
	return out.String()
}

// refusedIntoReview has the supplier refuse (429) every attempt of a new
// operation under key until its retry budget is spent, and returns its id
// once it waits in review (retries_exhausted).
func (in *instance) refusedIntoReview(t *testing.T, approver, agent, key string) string {
	t.Helper()
	in.refuseRetryBudget()
	approval := post(t, in.base+"/v1/approvals", approver, `{"action":"supplier.create_order","params":{"sku":"A-1"},"ttl_seconds":600,"policy_version":"p1"}`)
	op := post(t, in.base+"/v1/operations", agent, fmt.Sprintf(`{"action":"supplier.create_order","key":%q,"params":{"sku":"A-1"},"approval_id":%q}`, key, approval["id"]))
	id := op["id"].(string)
	in.waitStatus(t, agent, id, "review")
	return id
}

// refuseRetryBudget has the supplier answer the next five creates with
// 429, enough to spend the retry budget of the providers serve runs with.
func (in *instance) refuseRetryBudget() {
	refusals := make([]mocksupplier.Fault, 5)
	for i := range refusals {
		refusals[i] = mocksupplier.Fault{Kind: mocksupplier.RateLimit429}
	}
	in.supplier.SetFaults("", refusals...)
}

func (in *instance) waitStatus(t *testing.T, token, id, want string) map[string]any {
	t.Helper()
	var op map[string]any
	testpoll.Until(t, 20*time.Second, func() error {
		if op = get(t, in.base+"/v1/operations/"+id, token); op["status"] != want {
			return fmt.Errorf("operation is %v, want %s", op["status"], want)
		}
		return nil
	})
	return op
}

// connectBroker connects to the instance's streams, until the test ends.
func (in *instance) connectBroker(t *testing.T) *broker.Broker {
	t.Helper()
	b, err := broker.Connect(context.Background(), broker.Config{URL: testnats.URL(), Prefix: in.prefix})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.Close)
	return b
}

// dispatchHandled waits until the stream holds a dispatch message of
// operation id and every dispatch consumer has delivered and had
// acknowledged all it holds: the dispatcher has taken the operation's
// message and done all it will with it.
func (in *instance) dispatchHandled(t *testing.T, id string) {
	t.Helper()
	ctx := context.Background()
	b := in.connectBroker(t)
	stream, err := b.JetStream().Stream(ctx, b.OpsStream())
	if err != nil {
		t.Fatal(err)
	}
	handled := func() error {
		msg, err := stream.GetLastMsgForSubject(ctx, b.DispatchSubject("acme"))
		if err != nil {
			return fmt.Errorf("no dispatch message in the stream: %w", err)
		}
		var d ledger.Dispatch
		if err := json.Unmarshal(msg.Data, &d); err != nil || d.OperationID.String() != id {
			return fmt.Errorf("the last dispatch message %s does not name operation %s", msg.Data, id)
		}
		consumers := stream.ListConsumers(ctx)
		for c := range consumers.Info() {
			if c.NumPending > 0 || c.NumAckPending > 0 {
				return fmt.Errorf("consumer %s has %d messages to deliver and %d unacknowledged", c.Name, c.NumPending, c.NumAckPending)
			}
		}
		return consumers.Err()
	}
	// Twice in a row: a worker between its claim and its ack would
	// otherwise pass the first look.
	testpoll.Until(t, 15*time.Second, func() error {
		if err := handled(); err != nil {
			return err
		}
		return handled()
	})
}

// TestApprovedOperationReachesTheStream drives the real path of `serve`:
// tokens from the CLI, HTTP → one Postgres transaction → relay →
// JetStream, then a graceful shutdown.
func TestApprovedOperationReachesTheStream(t *testing.T) {
	t.Parallel()
	in := startServe(t)
	operator := in.token(t, "operator")
	post(t, in.base+"/v1/dispatch/pause", operator, `{}`) // keep the message in the stream unconsumed
	approver, agent := in.token(t, "approver"), in.token(t, "agent")
	approval := post(t, in.base+"/v1/approvals", approver, `{"action":"supplier.create_order","params":{"sku":"A-1","qty":3},"ttl_seconds":600,"policy_version":"p1"}`)
	op := post(t, in.base+"/v1/operations", agent, fmt.Sprintf(`{"action":"supplier.create_order","key":"po-37","params":{"qty":3,"sku":"A-1"},"approval_id":%q}`, approval["id"]))
	if op["status"] != "queued" {
		t.Fatalf("operation: %v", op)
	}

	b := in.connectBroker(t)
	stream, err := b.JetStream().Stream(context.Background(), b.OpsStream())
	if err != nil {
		t.Fatal(err)
	}
	var msg *jetstream.RawStreamMsg
	testpoll.Until(t, 15*time.Second, func() (err error) {
		msg, err = stream.GetLastMsgForSubject(context.Background(), b.DispatchSubject("acme"))
		return err
	})
	var d ledger.Dispatch
	if err := json.Unmarshal(msg.Data, &d); err != nil || d.OperationID.String() != op["id"] {
		t.Errorf("message %s does not name operation %v", msg.Data, op["id"])
	}
	if got, want := msg.Header.Get(jetstream.MsgIDHeader), ledger.DispatchMsgID(d.OperationID, 1); got != want {
		t.Errorf("Nats-Msg-Id = %q, want %q", got, want)
	}
	in.stop()
}

// TestOperationOverHTTPCreatesOneOrderAtTheSupplier is the whole product
// in one process: HTTP → Postgres → JetStream → dispatcher → supplier,
// with a lost response on the way, and the stop button.
func TestOperationOverHTTPCreatesOneOrderAtTheSupplier(t *testing.T) {
	t.Parallel()
	in := startServe(t)
	approver, agent, operator := in.token(t, "approver"), in.token(t, "agent"), in.token(t, "operator")

	in.supplier.SetFaults("", mocksupplier.Fault{Kind: mocksupplier.DropAfterCommit})
	approval := post(t, in.base+"/v1/approvals", approver, `{"action":"supplier.create_order","params":{"sku":"A-1","qty":3},"ttl_seconds":600,"policy_version":"p1"}`)
	op := post(t, in.base+"/v1/operations", agent, fmt.Sprintf(`{"action":"supplier.create_order","key":"po-1","params":{"qty":3,"sku":"A-1"},"approval_id":%q}`, approval["id"]))
	done := in.waitStatus(t, agent, op["id"].(string), "succeeded")
	if got := in.supplier.Orders(done["external_key"].(string)); got != 1 {
		t.Errorf("supplier orders = %d, want 1", got)
	}
	if !strings.Contains(done["summary"].(string), "confirmed") || done["provider_reference"] == nil {
		t.Errorf("succeeded view: %v", done)
	}

	// The stop button, from the operator's CLI: paused work stays queued
	// and nothing is sent.
	if out := in.ops(t, operator, "pause", "--provider", "acme"); !strings.Contains(out, "PAUSED provider=acme action=*") {
		t.Fatalf("ops pause printed %q", out)
	}
	approval2 := post(t, in.base+"/v1/approvals", approver, `{"action":"supplier.create_order","params":{"sku":"B-2"},"ttl_seconds":600,"policy_version":"p1"}`)
	op2 := post(t, in.base+"/v1/operations", agent, fmt.Sprintf(`{"action":"supplier.create_order","params":{"sku":"B-2"},"approval_id":%q}`, approval2["id"]))
	in.dispatchHandled(t, op2["id"].(string))
	if got := get(t, in.base+"/v1/operations/"+op2["id"].(string), agent); got["status"] != "queued" || in.supplier.Orders(op2["external_key"].(string)) != 0 {
		t.Fatalf("while paused: %v, orders %d", got["status"], in.supplier.Orders(op2["external_key"].(string)))
	}
	if out := in.ops(t, operator, "resume", "--provider", "acme"); !strings.Contains(out, "resumed: 1 pause(s) removed, 1 operation(s) released") {
		t.Errorf("ops resume printed %q", out)
	}
	if out := in.ops(t, operator, "resume"); !strings.Contains(out, "resumed: 0 pause(s) removed") || !strings.Contains(out, "no pause") {
		t.Errorf("ops resume with nothing paused printed %q", out)
	}
	in.waitStatus(t, agent, op2["id"].(string), "succeeded")
	if got := in.supplier.TotalOrders(); got != 2 {
		t.Errorf("supplier holds %d orders, want 2", got)
	}

	// A forged webhook is refused and counted.
	res, err := http.Post(in.base+"/v1/webhooks/acme", "application/json", strings.NewReader(`{"event_id":"e1"}`))
	if err != nil || res.StatusCode != 401 {
		t.Fatalf("forged webhook: %v %v", res, err)
	}
	res.Body.Close()
	// The lost response is settled by a resend under the same key, inside
	// the supplier's idempotency retention, which the supplier answers with
	// its stored order (a succeeded attempt, no second order); the second
	// operation succeeds at its first attempt. The relay may still be
	// publishing what the resume released: the figures settle within
	// seconds.
	wants := []string{
		`actledger_operations{state="succeeded"} 2`,
		`actledger_provider_attempts_total{class="unknown",provider="acme"} 1`,
		`actledger_provider_attempts_total{class="succeeded",provider="acme"} 2`,
		`actledger_webhook_verifications_failed_total{provider="acme",reason="missing_header"} 1`,
		`actledger_review_open{kind="operation"} 0`,
		`actledger_outbox_backlog 0`,
	}
	var missing []string
	var metrics []byte
	if res, err := http.Get(in.base + "/metrics"); err != nil || res.StatusCode != http.StatusUnauthorized {
		t.Fatalf("an anonymous scrape: %v %v, want 401", res, err)
	}
	scrape, _ := http.NewRequest(http.MethodGet, in.base+"/metrics", nil)
	scrape.Header.Set("Authorization", "Bearer "+in.token(t, "metrics"))
	testpoll.Until(t, 10*time.Second, func() error {
		res, err = http.DefaultClient.Do(scrape)
		if err != nil {
			t.Fatal(err)
		}
		metrics, _ = io.ReadAll(res.Body)
		res.Body.Close()
		missing = missing[:0]
		for _, want := range wants {
			if !strings.Contains(string(metrics), want) {
				missing = append(missing, want)
			}
		}
		if len(missing) > 0 {
			return fmt.Errorf("/metrics lacks %s:\n%s", strings.Join(missing, ", "), metrics)
		}
		return nil
	})
	in.stop()
}

// TestOperatorWorksTheReviewQueueFromTheCLI: an operation the supplier
// refused until retries ran out waits for a person; the operator sees it,
// replays the review stream (the lookup confirms nothing exists), retries
// it with the same key, and cancels another.
func TestOperatorWorksTheReviewQueueFromTheCLI(t *testing.T) {
	t.Parallel()
	in := startServe(t)
	approver, agent, operator := in.token(t, "approver"), in.token(t, "agent"), in.token(t, "operator")
	id := in.refusedIntoReview(t, approver, agent, "po-9")

	if out := in.ops(t, operator, "list"); !strings.Contains(out, id) || !strings.Contains(out, "retries_exhausted") || !strings.Contains(out, "allowed") {
		t.Errorf("ops list:\n%s", out)
	}
	if out := in.ops(t, operator, "show", id); !regexp.MustCompile(`retry allowed:\s+true`).MatchString(out) || !strings.Contains(out, "http_status") ||
		!regexp.MustCompile(`provider_reference:\s+none\n`).MatchString(out) || strings.Contains(out, "<nil>") {
		t.Errorf("ops show (a field without value reads none, never Go's <nil>):\n%s", out)
	}
	if out := in.ops(t, operator, "replay", "--dry-run"); !strings.Contains(out, "absence_confirmed") || !strings.Contains(out, "0 changed") {
		t.Errorf("ops replay --dry-run:\n%s", out)
	}
	if out := in.ops(t, operator, "retry", id, "--note", "limits lifted"); !strings.Contains(out, "queued again") {
		t.Errorf("ops retry: %s", out)
	}
	done := in.waitStatus(t, agent, id, "succeeded")
	if got := in.supplier.Orders(done["external_key"].(string)); got != 1 {
		t.Errorf("orders = %d, want 1", got)
	}

	// A second one, cancelled by the operator with a note.
	in.refuseRetryBudget()
	approval2 := post(t, in.base+"/v1/approvals", approver, `{"action":"supplier.create_order","params":{"sku":"B-2"},"ttl_seconds":600,"policy_version":"p1"}`)
	op2 := post(t, in.base+"/v1/operations", agent, fmt.Sprintf(`{"action":"supplier.create_order","params":{"sku":"B-2"},"approval_id":%q}`, approval2["id"]))
	in.waitStatus(t, agent, op2["id"].(string), "review")
	if out := in.ops(t, operator, "resolve", op2["id"].(string), "--outcome", "cancelled", "--note", "no longer needed"); out != op2["id"].(string)+" is cancelled\n" {
		t.Errorf("ops resolve: %s", out)
	}
	if out := in.ops(t, operator, "list"); !strings.Contains(out, "nothing waits for a person") {
		t.Errorf("ops list after: %s", out)
	}
}

func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

func waitReady(t *testing.T, base string, served <-chan error) {
	t.Helper()
	testpoll.Until(t, 30*time.Second, func() error {
		select {
		case err := <-served:
			t.Fatalf("serve exited early: %v", err)
		default:
		}
		res, err := http.Get(base + "/readyz")
		if err != nil {
			return fmt.Errorf("serve never became ready: %w", err)
		}
		res.Body.Close()
		if res.StatusCode != http.StatusOK {
			return fmt.Errorf("serve never became ready: /readyz answers %d", res.StatusCode)
		}
		return nil
	})
}

func get(t *testing.T, url, token string) map[string]any {
	t.Helper()
	req, _ := http.NewRequest("GET", url, nil)
	req.Header.Set("Authorization", "Bearer "+token)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	var out map[string]any
	raw, _ := io.ReadAll(res.Body)
	if res.StatusCode != 200 || json.Unmarshal(raw, &out) != nil {
		t.Fatalf("GET %s: %d %s", url, res.StatusCode, raw)
	}
	return out
}

func post(t *testing.T, url, token, body string) map[string]any {
	t.Helper()
	req, _ := http.NewRequest("POST", url, strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+token)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	var out map[string]any
	raw, _ := io.ReadAll(res.Body)
	if res.StatusCode >= 300 || json.Unmarshal(raw, &out) != nil {
		t.Fatalf("POST %s: %d %s", url, res.StatusCode, raw)
	}
	return out
}

// TestServeFitsTheProviderTimeoutToTheLease: a call must end within its
// dispatch lease. With LEASE_DURATION=5s, a provider whose timeout is left
// out gets half the lease and serve starts; an explicit timeout at or over
// the lease stops the start with an error naming both.
func TestServeFitsTheProviderTimeoutToTheLease(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		timeout string // the providers file's timeout line; "" leaves it out
		wantErr string
	}{
		{"left out", "", ""},
		{"set under the lease", "timeout: 2s", ""},
		{"set at the lease", "timeout: 5s", `provider "acme": timeout: 5s must be shorter than LEASE_DURATION 5s`},
		{"set to the default, over the lease", "timeout: 10s", `provider "acme": timeout: 10s must be shorter than LEASE_DURATION 5s`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			edit := func(cfg string) string {
				if tt.timeout == "" {
					return strings.Replace(cfg, "    timeout: 2s\n", "", 1)
				}
				return strings.Replace(cfg, "timeout: 2s", tt.timeout, 1)
			}
			if tt.wantErr == "" {
				in := startServeWith(t, edit)
				in.stop()
				return
			}
			in := prepareServe(t, edit)
			err := run(t.Context(), []string{"serve"}, in.getenv, io.Discard, io.Discard)
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("serve = %v, want an error containing %q", err, tt.wantErr)
			}
		})
	}
}
