package dispatcher_test

import (
	"context"
	"net/url"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/actledger/actledger/broker"
	"github.com/actledger/actledger/internal/testdb"
	"github.com/actledger/actledger/internal/testnats"
	"github.com/actledger/actledger/internal/testproxy"
	"github.com/actledger/actledger/ledger"
	"github.com/actledger/actledger/mocksupplier"
)

// waitCreates waits until the supplier has received n create requests for
// op (no database needed, so it works during an outage).
func (f *fixture) waitCreates(op ledger.Operation, n int) {
	f.t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for f.creates(op) < n {
		if time.Now().After(deadline) {
			f.t.Fatalf("supplier saw %d create requests, want %d", f.creates(op), n)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestPostgresOutageMidDispatchLosesNothingAndCausesNoSecondCall(t *testing.T) {
	t.Parallel()
	_, dbURL := testdb.NewWithURL(t)
	u, _ := url.Parse(dbURL)
	proxy := testproxy.New(t, u.Host)
	u.Host = proxy.Addr()
	cfg, err := pgxpool.ParseConfig(u.String())
	if err != nil {
		t.Fatal(err)
	}
	cfg.ConnConfig.ConnectTimeout = time.Second
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)

	f := setupWith(t, contract{lookupLag: 0}, mocksupplier.Ignore, pool, testnats.New(t))
	// The supplier commits the order, then takes a while to answer.
	f.supplier.SetFaults("", mocksupplier.Fault{Kind: mocksupplier.Delay, MS: 600})
	op := f.enqueue("po-1", `{"sku":"A-1"}`)
	f.startPipeline(1)
	f.waitCreates(op, 1)
	proxy.Cut() // Postgres goes away while the call is in flight
	time.Sleep(1500 * time.Millisecond)
	proxy.Restore()

	done := f.waitStatus(op, ledger.StatusSucceeded, 20*time.Second)
	if got, creates := f.orders(op), f.creates(op); got != 1 || creates != 1 {
		t.Errorf("orders %d, create requests %d; want 1 and 1", got, creates)
	}
	t.Logf("settled by: %v", f.eventKinds(done))
}

func TestNATSOutageMidDispatchLosesNothingAndCausesNoSecondCall(t *testing.T) {
	t.Parallel()
	natsURL, _ := url.Parse(testnats.URL())
	proxy := testproxy.New(t, natsURL.Host)
	b, err := broker.Connect(context.Background(), broker.Config{URL: "nats://" + proxy.Addr(), Prefix: testnats.Prefix(), Logger: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		proxy.Restore()
		_ = b.DeleteStreams(context.Background())
		b.Close()
	})

	f := setupWith(t, contract{lookupLag: 0}, mocksupplier.Ignore, testdb.New(t), b)
	f.supplier.SetFaults("", mocksupplier.Fault{Kind: mocksupplier.Delay, MS: 600})
	first := f.enqueue("po-1", `{"sku":"A-1"}`)
	f.startPipeline(1)
	f.waitCreates(first, 1)
	proxy.Cut() // NATS goes away while the call is in flight
	// Work accepted during the outage waits in the outbox.
	second := f.enqueue("po-2", `{"sku":"B-2"}`)
	f.waitStatus(first, ledger.StatusSucceeded, 10*time.Second)
	time.Sleep(time.Second)
	if got := f.creates(second); got != 0 {
		t.Fatalf("second operation sent during the NATS outage: %d create requests", got)
	}
	proxy.Restore()

	f.waitStatus(second, ledger.StatusSucceeded, 30*time.Second)
	time.Sleep(500 * time.Millisecond)
	for _, op := range []ledger.Operation{first, second} {
		if got, creates := f.orders(op), f.creates(op); got != 1 || creates != 1 {
			t.Errorf("%s: orders %d, create requests %d; want 1 and 1", op.Key, got, creates)
		}
	}
}
