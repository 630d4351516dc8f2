package dispatcher_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/actledger/actledger/internal/mocksupplier"
	"github.com/actledger/actledger/internal/testpipeline"
	"github.com/actledger/actledger/ledger"
	"github.com/actledger/actledger/provider"
)

// switchable is a provider whose supplier address a test switches: first
// an address that refuses connections, then the live supplier. It counts
// the creates it is asked for, each one connection attempt.
type switchable struct {
	current atomic.Pointer[provider.HTTP]
	creates atomic.Int64
}

func (s *switchable) Create(ctx context.Context, req provider.CreateRequest) provider.Result {
	s.creates.Add(1)
	return s.current.Load().Create(ctx, req)
}

func (s *switchable) Lookup(ctx context.Context, key provider.LookupRequest) provider.LookupResult {
	return s.current.Load().Lookup(ctx, key)
}

// An outage at one provider does not spread: 100 approved operations at
// an address that refuses connections make a few attempts (the breaker's
// failures, those already in flight, and one probe per cooldown, the
// cooldown doubling after each failed probe), none goes to review for it,
// and once the supplier is back the probe closes the circuit and every
// operation succeeds, one order each.
func TestOutageOpensTheCircuitInsteadOfSpendingEveryOperationsRetries(t *testing.T) {
	t.Parallel()
	refusing := refusingURL(t)
	sw := &switchable{}
	var live *provider.HTTP
	p := testpipeline.New(t, testpipeline.Options{
		Idempotency: true, LookupLag: 0, Mode: mocksupplier.Honour, MaxAttempts: 5, MaxElapsed: 10 * time.Minute,
		ProviderExtra: "    breaker: {failures: 5, cooldown: 1s}\n", Metrics: true,
		Providers: func(real provider.Provider) provider.Provider {
			live = real.(*provider.HTTP)
			cfg := *live.Config()
			cfg.BaseURL = refusing
			sw.current.Store(provider.NewHTTP(&cfg, provider.HTTPOptions{}))
			return sw
		},
	})
	ops := make([]ledger.Operation, 100)
	for i := range ops {
		ops[i] = p.Enqueue("po-"+string(rune('a'+i/26))+string(rune('a'+i%26)), `{"sku":"A-1"}`)
	}
	signals := &p.Start(1)[0].TestSignals
	opened := signals.CircuitOpened.WaitOrTimeout()
	if opened.Provider != "acme" || opened.Failures != 5 {
		t.Errorf("circuit opened %+v, want acme's after 5 failures", opened)
	}
	// The outage lasts three probes: the first a cooldown after the
	// opening, each next one twice the last cooldown after it.
	cooldown := *opened.Cooldown
	const probes = 3
	for i := range probes {
		sent := signals.ProbeSent.WaitOrTimeout()
		failed := signals.ProbeFailed.WaitOrTimeout()
		if *sent.Cooldown != cooldown || *failed.Cooldown != 2*cooldown {
			t.Errorf("probe %d sent under a cooldown of %s, failed to one of %s; want %s and %s",
				i+1, *sent.Cooldown, *failed.Cooldown, cooldown, 2*cooldown)
		}
		signals.ProbeSent.RequireEmpty() // one probe per cooldown
		cooldown = *failed.Cooldown
	}
	if n := sw.creates.Load(); n > 25 {
		t.Errorf("%d connection attempts at a refusing address over its opening and %d probes, want at most 25", n, probes)
	}
	var open bool
	circuits, err := p.Store.Circuits(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range circuits {
		open = open || (c.Provider == "acme" && c.Open())
	}
	if !open {
		t.Errorf("circuits %+v: want acme's open", circuits)
	}
	// An operator sees it: GET /v1/dispatch, the console's dispatch page,
	// /metrics.
	if _, out := p.Do("GET", "/v1/dispatch", p.Operator, ""); !strings.Contains(fmt.Sprint(out["circuits"]), "open:true") {
		t.Errorf("GET /v1/dispatch circuits = %v, want acme's open", out["circuits"])
	}
	for path, want := range map[string]string{
		"/metrics":          `actledger_provider_circuit_open{provider="acme"} 1`,
		"/console/dispatch": "Provider circuits",
	} {
		req, _ := http.NewRequest("GET", p.API.URL+path, nil)
		if path == "/metrics" {
			req.Header.Set("Authorization", "Bearer "+p.MetricsToken())
		} else {
			req.AddCookie(p.ConsoleCookie(p.Operator))
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if !strings.Contains(string(body), want) {
			t.Errorf("GET %s lacks %q", path, want)
		}
	}
	for _, op := range ops {
		if got := p.Get(op); got.Status == ledger.StatusReview {
			t.Fatalf("operation %s went to review during the outage; history:\n%s", op.Key, p.History(op))
		}
	}
	attempts := sw.creates.Load()
	sw.current.Store(live)
	if closed := signals.CircuitClosed.WaitOrTimeout(); closed != "acme" {
		t.Errorf("circuit of %s closed, want acme's", closed)
	}
	for _, op := range ops {
		p.WaitStatus(op, ledger.StatusSucceeded, 60*time.Second)
		if n := p.Orders(op); n != 1 {
			t.Errorf("operation %s: %d orders, want 1", op.Key, n)
		}
	}
	if circuits, _ := p.Store.Circuits(context.Background()); len(circuits) != 0 {
		t.Errorf("circuits after the recovery: %+v, want none", circuits)
	}
	t.Logf("attempts during the outage (its opening and %d probes): %d; after it: %d", probes, attempts, sw.creates.Load()-attempts)
}
