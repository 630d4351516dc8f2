package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/actledger/actledger/internal/mocksupplier"
	"github.com/actledger/actledger/internal/testpg"
	"github.com/actledger/actledger/internal/testpoll"
	"github.com/actledger/actledger/localpg"
)

// TestAFailoverThatLostTheLastSecondsEndsWithOneEffectPerIntention is the
// asynchronous failover of docs/reliability.md, on purpose: the standby
// stops receiving, agents go on (some operations reach the supplier,
// some only JetStream), the primary is killed and the standby promoted,
// so the new primary has lost them all. The dispatcher's next message
// of a lost operation pauses dispatch (ledger_behind); the agents ask
// again under their keys (new approvals, the same params) and get new
// operations that send the lost ones' external keys; `actledger recover`
// turns the window's operations unknown and lifts the pause; each is
// settled under its key. The supplier ends with exactly one order per
// intention, whether it honours idempotency keys or not (then it is the
// lookup before any resend that finds the first effect).
func TestAFailoverThatLostTheLastSecondsEndsWithOneEffectPerIntention(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		mode mocksupplier.Mode
		edit func(string) string
	}{
		{"a supplier that honours idempotency keys", mocksupplier.Honour, nil},
		{"a supplier without idempotency keys", mocksupplier.Ignore, func(cfg string) string {
			return strings.Replace(cfg, "    idempotency: {header: Idempotency-Key, retention: 24h}\n", "", 1)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			pair := testpg.New(t, false, "actledger")
			primary, standby, dbURL := pair.Primary, pair.Standby, pair.URL("actledger")
			in := prepareServeSupplier(t, tc.edit, tc.mode)
			getenv := in.getenv
			in.getenv = func(k string) string {
				if k == "DATABASE_URL" {
					return dbURL
				}
				return getenv(k)
			}
			if err := run(ctx, []string{"migrate"}, in.getenv, io.Discard, io.Discard); err != nil {
				t.Fatal(err)
			}
			approver, agent, operator := in.token(t, "approver"), in.token(t, "agent"), in.token(t, "operator")
			startServeProcess(t, in, "api,relay,reconciler")
			dispatcher := startServeProcess(t, in, "dispatcher")

			order := func(key string) string {
				t.Helper()
				params := fmt.Sprintf(`{"sku":%q,"qty":20}`, key)
				approval := post(t, in.base+"/v1/approvals", approver, fmt.Sprintf(`{"action":"supplier.create_order","params":%s,"ttl_seconds":600,"policy_version":"p1"}`, params))
				op := post(t, in.base+"/v1/operations", agent, fmt.Sprintf(`{"action":"supplier.create_order","key":%q,"params":%s,"approval_id":%q}`, key, params, approval["id"]))
				return op["id"].(string)
			}
			keys := func(prefix string, n int) []string {
				out := make([]string, n)
				for i := range out {
					out[i] = fmt.Sprintf("%s-%d", prefix, i)
				}
				return out
			}
			kept, sent, published := keys("kept", 5), keys("sent", 5), keys("published", 5)
			externalKey := map[string]string{}
			for _, key := range kept {
				id := order(key)
				externalKey[key] = in.waitStatus(t, agent, id, "succeeded")["external_key"].(string)
			}
			if err := standby.WaitReplayed(ctx, primary); err != nil {
				t.Fatal(err)
			}
			lastReplicated := time.Now()
			if err := standby.StopReceiving(ctx); err != nil {
				t.Fatal(err)
			}
			// Lost with their effect: sent to the supplier.
			for _, key := range sent {
				id := order(key)
				externalKey[key] = in.waitStatus(t, agent, id, "succeeded")["external_key"].(string)
			}
			// Lost before their effect: their dispatch messages are in
			// JetStream, no dispatcher runs.
			dispatcher.stop()
			for _, key := range published {
				externalKey[key] = get(t, in.base+"/v1/operations/"+order(key), agent)["external_key"].(string)
			}
			waitPublished(t, primary)

			if err := primary.Kill(); err != nil {
				t.Fatal(err)
			}
			if err := standby.Promote(ctx); err != nil {
				t.Fatal(err)
			}
			startServeProcess(t, in, "dispatcher")
			testpoll.Until(t, 30*time.Second, func() error {
				// 503 while the API's pool finds the new primary.
				status, raw := getRaw(in.base+"/v1/dispatch", operator)
				if status != http.StatusOK || !strings.Contains(raw, "ledger_behind") {
					return fmt.Errorf("GET /v1/dispatch: %d %s, want the ledger_behind pause", status, raw)
				}
				return nil
			})

			// The agents ask again for what the ledger lost.
			again := map[string]string{}
			for _, key := range append(append([]string(nil), sent...), published...) {
				again[key] = order(key)
			}
			var out bytes.Buffer
			if err := run(ctx, []string{"recover", "--since", lastReplicated.UTC().Format(time.RFC3339Nano)}, in.getenv, &out, io.Discard); err != nil {
				t.Fatalf("recover: %v\n%s", err, out.String())
			}
			for key, id := range again {
				op := in.waitStatus(t, agent, id, "succeeded")
				if op["external_key"] != externalKey[key] {
					t.Errorf("%s asked again has external key %v, the lost operation's was %s", key, op["external_key"], externalKey[key])
				}
			}
			for _, key := range append(append(append([]string(nil), kept...), sent...), published...) {
				if n := in.supplier.Orders(externalKey[key]); n != 1 {
					t.Errorf("%s: %d orders at the supplier, want 1", key, n)
				}
			}
			if n, want := in.supplier.TotalOrders(), len(kept)+len(sent)+len(published); n != want {
				t.Errorf("%d orders at the supplier, want %d, one per intention\nrecover said:\n%s", n, want, out.String())
			}
		})
	}
}

// getRaw is a GET with token that reports what it got, for a poll.
func getRaw(url, token string) (int, string) {
	req, _ := http.NewRequest(http.MethodGet, url, nil)
	req.Header.Set("Authorization", "Bearer "+token)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err.Error()
	}
	defer res.Body.Close()
	raw, _ := io.ReadAll(res.Body)
	return res.StatusCode, string(raw)
}

// waitPublished waits until the relay has published every outbox row of
// the primary's ledger to JetStream.
func waitPublished(t *testing.T, primary *localpg.Private) {
	t.Helper()
	conn, err := pgx.Connect(context.Background(), primary.URL("actledger"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	testpoll.Until(t, 20*time.Second, func() error {
		var n int
		if err := conn.QueryRow(context.Background(), `SELECT count(*) FROM outbox WHERE published_at IS NULL`).Scan(&n); err != nil {
			return err
		}
		if n > 0 {
			return fmt.Errorf("%d outbox rows not published yet", n)
		}
		return nil
	})
}
