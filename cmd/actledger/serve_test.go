package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/actledger/actledger/broker"
	"github.com/actledger/actledger/internal/testdb"
	"github.com/actledger/actledger/internal/testnats"
	"github.com/actledger/actledger/ledger"
)

// TestApprovedOperationReachesTheStream drives the real path of `serve`:
// tokens from the CLI, HTTP → one Postgres transaction → relay →
// JetStream, then a graceful shutdown.
func TestApprovedOperationReachesTheStream(t *testing.T) {
	t.Parallel()
	_, dbURL := testdb.NewWithURL(t)
	prefix := testnats.Prefix()
	addr := freeAddr(t)
	vars := map[string]string{
		"DATABASE_URL":   dbURL,
		"NATS_URL":       testnats.URL(),
		"STREAM_PREFIX":  prefix,
		"LISTEN_ADDR":    addr,
		"PROVIDERS_FILE": "../../demo/providers.yaml",
	}
	getenv := func(k string) string { return vars[k] }
	t.Cleanup(func() {
		b, err := broker.Connect(context.Background(), broker.Config{URL: testnats.URL(), Prefix: prefix})
		if err == nil {
			_ = b.DeleteStreams(context.Background())
			b.Close()
		}
	})

	tokenFor := func(role string) string {
		var out bytes.Buffer
		if err := run(t.Context(), []string{"token", "create", "--tenant", "demo", "--role", role}, getenv, &out, io.Discard); err != nil {
			t.Fatal(err)
		}
		return strings.TrimSpace(out.String())
	}
	approver, agent := tokenFor("approver"), tokenFor("agent")

	ctx, cancel := context.WithCancel(t.Context())
	served := make(chan error, 1)
	go func() { served <- run(ctx, []string{"serve"}, getenv, io.Discard, io.Discard) }()
	base := "http://" + addr
	waitReady(t, base, served)

	approval := post(t, base+"/v1/approvals", approver, `{"action":"supplier.create_order","params":{"sku":"A-1","qty":3},"ttl_seconds":600,"policy_version":"p1"}`)
	op := post(t, base+"/v1/operations", agent, fmt.Sprintf(`{"action":"supplier.create_order","key":"po-37","params":{"qty":3,"sku":"A-1"},"approval_id":%q}`, approval["id"]))
	if op["status"] != "queued" {
		t.Fatalf("operation: %v", op)
	}

	b, err := broker.Connect(context.Background(), broker.Config{URL: testnats.URL(), Prefix: prefix})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	stream, err := b.JetStream().Stream(context.Background(), b.OpsStream())
	if err != nil {
		t.Fatal(err)
	}
	var msg *jetstream.RawStreamMsg
	deadline := time.Now().Add(15 * time.Second)
	for msg == nil {
		msg, _ = stream.GetLastMsgForSubject(context.Background(), b.DispatchSubject("acme"))
		if msg == nil && time.Now().After(deadline) {
			t.Fatal("no dispatch message reached the stream")
		}
		time.Sleep(20 * time.Millisecond)
	}
	var d ledger.Dispatch
	if err := json.Unmarshal(msg.Data, &d); err != nil || d.OperationID.String() != op["id"] {
		t.Errorf("message %s does not name operation %v", msg.Data, op["id"])
	}
	if got, want := msg.Header.Get(jetstream.MsgIDHeader), ledger.DispatchMsgID(d.OperationID, 1); got != want {
		t.Errorf("Nats-Msg-Id = %q, want %q", got, want)
	}

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
	deadline := time.Now().Add(30 * time.Second)
	for {
		select {
		case err := <-served:
			t.Fatalf("serve exited early: %v", err)
		default:
		}
		res, err := http.Get(base + "/readyz")
		if err == nil {
			res.Body.Close()
			if res.StatusCode == 200 {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatal("serve never became ready")
		}
		time.Sleep(50 * time.Millisecond)
	}
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
