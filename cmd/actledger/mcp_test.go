package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// transcript keeps what one side of a pipe wrote, for the test's log.
type transcript struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (t *transcript) tee(w io.WriteCloser) io.WriteCloser {
	return struct {
		io.Writer
		io.Closer
	}{io.MultiWriter(w, t), w}
}

func (t *transcript) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.b.Write(p)
}

func (t *transcript) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.b.String()
}

// TestMCPOverStdioCallsTheRunningService runs `actledger mcp` on pipes
// against a running `serve`: the agent lists the tools and proposes an
// order the demo's policy approves, then waits for it with get_operation;
// the supplier holds exactly one order.
func TestMCPOverStdioCallsTheRunningService(t *testing.T) {
	t.Parallel()
	in := startServe(t)
	agent := in.token(t, "agent")
	getenv := in.clientEnv(agent)
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	toServer, clientOut := io.Pipe()
	clientIn, fromServer := io.Pipe()
	done := make(chan error, 1)
	go func() {
		done <- serveMCP(ctx, getenv, nil, toServer, fromServer, slog.New(slog.DiscardHandler))
		fromServer.Close()
	}()
	var sent, received transcript
	transport := &sdk.IOTransport{Reader: io.NopCloser(io.TeeReader(clientIn, &received)), Writer: sent.tee(clientOut)}
	cs, err := sdk.NewClient(&sdk.Implementation{Name: "test-agent", Version: "1"}, nil).Connect(ctx, transport, nil)
	if err != nil {
		t.Fatal(err)
	}

	tools, err := cs.ListTools(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tool := range tools.Tools {
		names = append(names, tool.Name)
	}
	if got := strings.Join(names, ","); !strings.Contains(got, "supplier_create_order") || !strings.Contains(got, "get_operation") || !strings.Contains(got, "list_operations") {
		t.Fatalf("tools = %s", got)
	}
	res, err := cs.CallTool(ctx, &sdk.CallToolParams{Name: "supplier_create_order", Arguments: map[string]any{
		"key": "po-stdio-1", "params": map[string]any{"sku": "A-1", "qty": 2}, "request_approval": true, "reason": "restock",
	}})
	if err != nil || res.IsError {
		t.Fatalf("call = %v, %v", res, err)
	}
	op := res.StructuredContent.(map[string]any)
	res, err = cs.CallTool(ctx, &sdk.CallToolParams{Name: "get_operation", Arguments: map[string]any{"id": op["id"], "wait_seconds": 30}})
	if err != nil || res.IsError {
		t.Fatalf("get_operation = %v, %v", res, err)
	}
	final := res.StructuredContent.(map[string]any)
	if final["status"] != "succeeded" {
		t.Fatalf("get_operation with wait = %v, want succeeded", final["status"])
	}
	if n := in.supplier.Orders(final["external_key"].(string)); n != 1 {
		t.Fatalf("supplier has %d orders, want exactly 1", n)
	}
	if err := cs.Close(); err != nil {
		t.Fatal(err)
	}
	clientOut.Close()
	if err := <-done; err != nil {
		t.Fatalf("actledger mcp ended with %v", err)
	}
	t.Logf("client → server:\n%s\nserver → client:\n%s", sent.String(), received.String())

	// The same service answers MCP over HTTP on its own listener.
	hc := &http.Client{Transport: bearerTransport{agent}}
	hs, err := sdk.NewClient(&sdk.Implementation{Name: "test-agent", Version: "1"}, nil).Connect(ctx,
		&sdk.StreamableClientTransport{Endpoint: in.base + "/mcp", HTTPClient: hc, MaxRetries: -1, DisableStandaloneSSE: true}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer hs.Close()
	res, err = hs.CallTool(ctx, &sdk.CallToolParams{Name: "list_operations", Arguments: map[string]any{"status": "succeeded"}})
	if err != nil || res.IsError {
		t.Fatalf("list_operations over HTTP = %v, %v", res, err)
	}
	raw, _ := json.Marshal(res.StructuredContent)
	if !strings.Contains(string(raw), final["id"].(string)) {
		t.Errorf("list_operations over HTTP = %s, want the operation", raw)
	}
}

type bearerTransport struct{ token string }

func (b bearerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return http.DefaultTransport.RoundTrip(r)
}

// TestHelpNeedsNoToken: ops, approvals and mcp print their usage for
// help, -h and --help without ACTLEDGER_TOKEN (they used to demand it
// first).
func TestHelpNeedsNoToken(t *testing.T) {
	t.Parallel()
	noEnv := func(string) string { return "" }
	for _, cmd := range []string{"ops", "approvals", "mcp"} {
		for _, flag := range []string{"help", "-h", "--help"} {
			var out bytes.Buffer
			if err := run(t.Context(), []string{cmd, flag}, noEnv, &out, io.Discard); err != nil {
				t.Errorf("actledger %s %s: %v", cmd, flag, err)
				continue
			}
			if !strings.Contains(out.String(), "actledger") || !strings.Contains(out.String(), "ACTLEDGER_TOKEN") {
				t.Errorf("actledger %s %s printed %q, want the usage", cmd, flag, out.String())
			}
		}
	}
}
