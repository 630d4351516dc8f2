package dispatcher_test

import (
	"context"
	"log/slog"
	"net/url"
	"testing"
	"time"

	"github.com/actledger/actledger/broker"
	"github.com/actledger/actledger/internal/mocksupplier"
	"github.com/actledger/actledger/internal/testdb"
	"github.com/actledger/actledger/internal/testnats"
	"github.com/actledger/actledger/internal/testpipeline"
	"github.com/actledger/actledger/internal/testproxy"
	"github.com/actledger/actledger/ledger"
)

func TestPostgresOutageMidDispatchLosesNothingAndCausesNoSecondCall(t *testing.T) {
	t.Parallel()
	pool, proxy := testdb.NewBehindProxy(t)
	p := testpipeline.New(t, testpipeline.Options{LookupLag: 0, Mode: mocksupplier.Ignore, Pool: pool})
	// The supplier commits the order, then takes a while to answer.
	p.Supplier.SetFaults("", mocksupplier.Fault{Kind: mocksupplier.Delay, MS: 600})
	op := p.Enqueue("po-1", `{"sku":"A-1"}`)
	p.Start(1)
	p.Eventually(settle, "the create request", func() bool { return p.Creates(op) == 1 })
	proxy.Cut() // Postgres goes away while the call is in flight
	time.Sleep(1500 * time.Millisecond)
	proxy.Restore()

	done := p.WaitStatus(op, ledger.StatusSucceeded, 20*time.Second)
	if got, creates := p.Orders(op), p.Creates(op); got != 1 || creates != 1 {
		t.Errorf("orders %d, create requests %d; want 1 and 1", got, creates)
	}
	t.Logf("settled by: %v", p.Kinds(done))
}

func TestNATSOutageMidDispatchLosesNothingAndCausesNoSecondCall(t *testing.T) {
	t.Parallel()
	testnats.Anchor(t)
	natsURL, _ := url.Parse(testnats.URL())
	proxy := testproxy.New(t, natsURL.Host)
	b, err := broker.Connect(context.Background(), broker.Config{URL: "nats://" + proxy.Addr(), Prefix: testnats.Prefix(), Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		proxy.Restore()
		_ = b.DeleteStreams(context.Background())
		b.Close()
	})
	p := testpipeline.New(t, testpipeline.Options{LookupLag: 0, Mode: mocksupplier.Ignore, Broker: b})
	p.Supplier.SetFaults("", mocksupplier.Fault{Kind: mocksupplier.Delay, MS: 600})
	first := p.Enqueue("po-1", `{"sku":"A-1"}`)
	p.Start(1)
	p.Eventually(settle, "the create request", func() bool { return p.Creates(first) == 1 })
	proxy.Cut() // NATS goes away while the call is in flight
	// Work accepted during the outage waits in the outbox.
	second := p.Enqueue("po-2", `{"sku":"B-2"}`)
	p.WaitStatus(first, ledger.StatusSucceeded, 10*time.Second)
	// The relay has tried to publish it, and its row is still there.
	if err := p.Relay.TestSignals.BatchFailed.WaitOrTimeout(); err == nil {
		t.Fatal("the relay signalled a failed batch without its error")
	}
	var waiting int
	if err := p.Pool.QueryRow(context.Background(), `SELECT count(*) FROM outbox WHERE msg_id = $1`,
		ledger.DispatchMsgID(second.ID, second.Version)).Scan(&waiting); err != nil {
		t.Fatal(err)
	}
	if got := p.Creates(second); got != 0 || waiting != 1 {
		t.Fatalf("during the NATS outage the second operation had %d create requests and %d outbox rows, want 0 and 1", got, waiting)
	}
	proxy.Restore()

	p.WaitStatus(second, ledger.StatusSucceeded, 30*time.Second)
	p.Settled(settle) // every copy of the messages handled
	for _, op := range []ledger.Operation{first, second} {
		if got, creates := p.Orders(op), p.Creates(op); got != 1 || creates != 1 {
			t.Errorf("%s: orders %d, create requests %d; want 1 and 1", op.Key, got, creates)
		}
	}
}
