package dispatcher_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/nats-io/nats.go"

	"github.com/actledger/actledger/auth"
	"github.com/actledger/actledger/internal/mocksupplier"
	"github.com/actledger/actledger/internal/testfactory"
	"github.com/actledger/actledger/internal/testpipeline"
	"github.com/actledger/actledger/ledger"
	"github.com/actledger/actledger/retention"
)

// publishDispatch puts a dispatch message for id at version on provider
// acme's subject straight into JetStream, as the stream holds it after the
// ledger lost the transaction that wrote it (a failover to an
// asynchronous replica, a restore): nothing of it is in Postgres.
func publishDispatch(t *testing.T, p *testpipeline.Pipeline, id uuid.UUID, version int64) {
	t.Helper()
	m := ledger.DispatchMessage{Subject: p.Broker.DispatchSubject("acme"), OperationID: id, Version: version}.Outbox()
	msg := &nats.Msg{Subject: m.Subject, Data: m.Payload, Header: nats.Header{}}
	msg.Header.Set(nats.MsgIdHdr, m.MsgID)
	if _, err := p.Broker.JetStream().PublishMsg(context.Background(), msg); err != nil {
		t.Fatal(err)
	}
}

// v7At is a UUIDv7 made at t: its first 48 bits are t's Unix
// milliseconds.
func v7At(at time.Time) uuid.UUID {
	id := uuid.Must(uuid.NewV7())
	ms := uint64(at.UnixMilli())
	for i := range 6 {
		id[i] = byte(ms >> (40 - 8*i))
	}
	return id
}

// scrape reads GET /metrics.
func scrape(t *testing.T, p *testpipeline.Pipeline) string {
	t.Helper()
	req, _ := http.NewRequest("GET", p.API.URL+"/metrics", nil)
	req.Header.Set("Authorization", "Bearer "+p.MetricsToken())
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	body, _ := io.ReadAll(res.Body)
	return string(body)
}

// TestDispatchMessageForAnOperationTheLedgerNeverHadPausesDispatchForEveryTenant:
// a dispatch message naming an operation the ledger does not hold, made
// after any prune, proves that committed work was lost. Dispatch is
// paused for every tenant with reason ledger_behind (GET /v1/dispatch,
// the console's dispatch page, actledger_ledger_behind), the API still
// accepts proposals and operations, which wait unsent (no order at the
// supplier), and a resume of the whole tenant's dispatch sends them.
func TestDispatchMessageForAnOperationTheLedgerNeverHadPausesDispatchForEveryTenant(t *testing.T) {
	t.Parallel()
	p := testpipeline.New(t, testpipeline.Options{Idempotency: true, Mode: mocksupplier.Honour, Metrics: true})
	otherOperator := p.TokenFor("Globex", auth.RoleOperator)
	if got := scrape(t, p); !strings.Contains(got, "\nactledger_ledger_behind 0\n") {
		t.Fatalf("before: /metrics lacks actledger_ledger_behind 0")
	}
	p.Start(1)
	lost := uuid.Must(uuid.NewV7())
	publishDispatch(t, p, lost, 3)
	p.Eventually(30*time.Second, "dispatch paused for ledger_behind", func() bool {
		return len(p.LedgerBehindPauses(p.TenantID)) == 1
	})
	if pz := p.LedgerBehindPauses(p.TenantID)[0]; pz.Provider != "" || pz.Action != "" || !strings.Contains(pz.Detail, lost.String()) {
		t.Errorf("pause %+v: want the whole tenant's, naming %s", pz, lost)
	}
	for who, token := range map[string]string{"the pipeline's tenant": p.Operator, "another tenant": otherOperator} {
		_, out := p.Do("GET", "/v1/dispatch", token, "")
		if got := fmt.Sprint(out["paused"]); !strings.Contains(got, "reason:ledger_behind") || !strings.Contains(got, lost.String()) {
			t.Errorf("GET /v1/dispatch of %s: paused %s, want reason ledger_behind naming %s", who, got, lost)
		}
	}
	if got := scrape(t, p); !strings.Contains(got, "\nactledger_ledger_behind 1\n") {
		t.Errorf("/metrics: want actledger_ledger_behind 1")
	}
	req, _ := http.NewRequest("GET", p.API.URL+"/console/dispatch", nil)
	req.AddCookie(p.ConsoleCookie(p.Operator))
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	page, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if !strings.Contains(string(page), "The ledger is behind its messages") || !strings.Contains(string(page), "<td>ledger_behind</td>") {
		t.Errorf("the console's dispatch page does not say the ledger is behind")
	}

	// Requests are still accepted, and wait.
	if status, out := p.Propose("po-proposed", `{"sku":"A-1","qty":1}`); status != http.StatusAccepted {
		t.Fatalf("propose while the ledger is behind: %d %v", status, out)
	}
	op := p.Enqueue("po-after", `{"sku":"A-1","qty":2}`)
	if got := p.NothingMore(op, settle); got.Status != ledger.StatusQueued || p.Orders(op) != 0 {
		t.Fatalf("while paused the operation is %s with %d orders, want queued with none", got.Status, p.Orders(op))
	}

	if status, out := p.Do("POST", "/v1/dispatch/resume", p.Operator, `{}`); status != http.StatusOK || out["removed"] != float64(1) {
		t.Fatalf("resume: %d %v", status, out)
	}
	p.WaitStatus(op, ledger.StatusSucceeded, settle)
	if got := p.Orders(op); got != 1 {
		t.Errorf("orders after the resume = %d, want 1", got)
	}
	if n := len(p.LedgerBehindPauses(p.TenantID)); n != 0 {
		t.Errorf("%d ledger_behind pauses left after the resume", n)
	}
}

// TestDispatchMessageForAPrunedOperationDoesNotPause: retention deletes
// settled operations, and a late redelivery of one's dispatch message
// names an operation the ledger no longer holds. Its prune left a key
// tombstone, so it is not taken for a loss: nothing is paused. An
// operation made before the prune that left none was lost.
func TestDispatchMessageForAPrunedOperationDoesNotPause(t *testing.T) {
	t.Parallel()
	p := testpipeline.New(t, testpipeline.Options{Idempotency: true, Mode: mocksupplier.Honour})
	p.Start(1)
	op := p.Enqueue("po-old", `{"sku":"A-1","qty":1}`)
	done := p.WaitStatus(op, ledger.StatusSucceeded, settle)
	p.Settled(settle)
	testfactory.Backdate(t, p.Pool, 100*24*time.Hour, op.ID)
	pr, err := retention.New(retention.Config{Store: p.Store, Pool: p.Pool, OlderThan: 90 * 24 * time.Hour, Archive: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	if sum, err := pr.Run(context.Background(), false); err != nil || sum.Operations != 1 {
		t.Fatalf("prune: %+v %v, want the operation pruned", sum, err)
	}

	publishDispatch(t, p, op.ID, done.Version)
	// Settled: the consumer holds no message pending or unacknowledged,
	// so the message was handled (terminated after its verdict).
	p.Settled(settle)
	if pauses, err := p.Store.Pauses(context.Background(), p.TenantID); err != nil || len(pauses) != 0 {
		t.Fatalf("pauses after a message for a pruned operation: %v %v, want none", pauses, err)
	}
	// The same pipeline takes a message for an operation that left no
	// key tombstone for what it is, though it was made before the prune:
	// every operation pruned since the ledger keeps tombstones left one.
	publishDispatch(t, p, v7At(time.Now().Add(-time.Hour)), 1)
	p.Eventually(30*time.Second, "a lost operation's message pausing dispatch", func() bool {
		return len(p.LedgerBehindPauses(p.TenantID)) == 1
	})
}

// TestAnOperationAskedAgainAfterTheLedgerLostItMakesOneEffect: the ledger
// lost a succeeded operation's row (a failover to an asynchronous
// replica, a restore) while its order stays at the supplier, and the
// agent asks again under the same key with a new approval, as a real
// agent does. The new operation sends the first one's external key, the
// supplier (which honours idempotency keys) answers with the first order,
// and the operation succeeds: one order at the supplier for the one
// intention.
func TestAnOperationAskedAgainAfterTheLedgerLostItMakesOneEffect(t *testing.T) {
	t.Parallel()
	p := testpipeline.New(t, testpipeline.Options{Idempotency: true, Mode: mocksupplier.Honour})
	p.Start(1)
	const key, params = "po-lost", `{"sku":"A-1","qty":3}`
	first := p.WaitStatus(p.Enqueue(key, params), ledger.StatusSucceeded, settle)
	p.Settled(settle)
	testfactory.Lose(t, p.Pool, first.ID)

	again := p.Enqueue(key, params)
	if again.ID == first.ID || again.ExternalKey != first.ExternalKey {
		t.Fatalf("asked again: operation %s with external key %q, want a new id with %q", again.ID, again.ExternalKey, first.ExternalKey)
	}
	done := p.WaitStatus(again, ledger.StatusSucceeded, settle)
	p.Settled(settle)
	if got := p.Supplier.TotalOrders(); got != 1 || p.Orders(done) != 1 {
		t.Errorf("%d orders at the supplier (%d under %s), want the first one only", got, p.Orders(done), done.ExternalKey)
	}
	if done.ProviderReference == nil || first.ProviderReference == nil || *done.ProviderReference != *first.ProviderReference {
		t.Errorf("provider reference %v, want the first order's %v", done.ProviderReference, first.ProviderReference)
	}
}
