package cluster_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"slices"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/actledger/actledger/auth"
	"github.com/actledger/actledger/internal/mocksupplier"
	"github.com/actledger/actledger/internal/testcluster"
	"github.com/actledger/actledger/internal/testdb"
	"github.com/actledger/actledger/internal/testfactory"
	"github.com/actledger/actledger/internal/testnats"
	"github.com/actledger/actledger/internal/testpipeline"
	"github.com/actledger/actledger/internal/testpoll"
	"github.com/actledger/actledger/ledger"
)

// buildActledger builds cmd/actledger into a temporary directory, with
// the race detector when this test binary has it: the packages are then
// the ones this test's own compile left in the build cache (a build
// without -race would compile the whole product a second time), and the
// served processes are checked for races too.
func buildActledger(t *testing.T) string {
	t.Helper()
	_, file, _, _ := runtime.Caller(0)
	root := filepath.Dir(filepath.Dir(file))
	bin := filepath.Join(t.TempDir(), "actledger")
	args := []string{"build", "-o", bin}
	if raceBuild() {
		args = append(args, "-race")
	}
	cmd := exec.Command("go", append(args, "./cmd/actledger")...)
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build ./cmd/actledger: %v\n%s", err, out)
	}
	return bin
}

// raceBuild reports whether this test binary was built with -race.
func raceBuild() bool {
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return false
	}
	for _, s := range info.Settings {
		if s.Key == "-race" {
			return s.Value == "true"
		}
	}
	return false
}

// holdingGate sits between one actledger process and the shared supplier.
// While holding, it passes each create request on (the order is made) and
// then keeps the answer until the caller goes away: the process is
// mid-call, its order exists, and it has not heard so.
type holdingGate struct {
	supplier *mocksupplier.Server
	mu       sync.Mutex
	holding  bool
	// held are the references whose answers are being withheld from a
	// caller still waiting: a call the process gave up on (its timeout)
	// leaves, until freeze, so that at the kill held names the calls in
	// flight.
	held   []string
	frozen bool
}

func (g *holdingGate) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	g.mu.Lock()
	hold := g.holding && r.Method == http.MethodPost
	g.mu.Unlock()
	if !hold {
		g.supplier.ServeHTTP(w, r)
		return
	}
	rec := httptest.NewRecorder()
	g.supplier.ServeHTTP(rec, r)
	key := r.Header.Get("Idempotency-Key")
	g.mu.Lock()
	g.held = append(g.held, key)
	g.mu.Unlock()
	<-r.Context().Done()
	g.mu.Lock()
	defer g.mu.Unlock()
	if !g.frozen {
		// The caller gave up before it was killed: it recorded the
		// outcome itself, and the call was not in flight at the kill.
		g.held = slices.DeleteFunc(g.held, func(k string) bool { return k == key })
	}
}

// freeze keeps held as it is from now on: call it right before the kill.
func (g *holdingGate) freeze() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.frozen = true
}

func (g *holdingGate) heldKeys() []string {
	g.mu.Lock()
	defer g.mu.Unlock()
	return slices.Clone(g.held)
}

// providersYAML is the providers file of one process: provider acme at
// baseURL, keys honoured, lookups without lag.
func providersYAML(baseURL, tenant string) string {
	return fmt.Sprintf(`providers:
  acme:
    base_url: %s
    account: acct_test
    environment: test
    timeout: 1s
    create: {method: POST, path: /v1/orders}
    reference_param: client_reference
    reference_field: id
    idempotency: {header: Idempotency-Key, retention: 24h}
    lookup: {path: "/v1/orders?client_reference={reference}", visibility_lag: 0s}
    retry: {max_attempts: 20, initial: 50ms, max: 200ms, max_elapsed: 2m}
    tenant: %q
    review: {owner: supply-ops, deadline: 4h}
actions:
  %s: {provider: acme}
`, baseURL, tenant, testpipeline.Action)
}

// serveProcess is one `actledger serve` with every role.
type serveProcess struct {
	name string
	cmd  *exec.Cmd
	done chan struct{}
	url  string
	log  string
}

func startServe(t *testing.T, bin, name, dbURL, natsURLs, prefix, supplierURL, tenant string) *serveProcess {
	t.Helper()
	dir := t.TempDir()
	providers := filepath.Join(dir, "providers.yaml")
	if err := os.WriteFile(providers, []byte(providersYAML(supplierURL, tenant)), 0o644); err != nil {
		t.Fatal(err)
	}
	addr := fmt.Sprintf("127.0.0.1:%d", testcluster.FreePorts(t, 1)[0])
	logFile, err := os.Create(filepath.Join(dir, name+".log"))
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "serve")
	cmd.Env = append(os.Environ(),
		"DATABASE_URL="+dbURL, "NATS_URL="+natsURLs, "STREAM_PREFIX="+prefix,
		fmt.Sprintf("STREAM_REPLICAS=%d", testcluster.Size), "LISTEN_ADDR="+addr,
		"PROVIDERS_FILE="+providers, "LEASE_DURATION=3s", "DISPATCH_CONCURRENCY=4", "LOG_LEVEL=info")
	cmd.Stdout, cmd.Stderr = logFile, logFile
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	sp := &serveProcess{name: name, cmd: cmd, done: make(chan struct{}), url: "http://" + addr, log: logFile.Name()}
	go func() { _ = cmd.Wait(); logFile.Close(); close(sp.done) }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGKILL)
		<-sp.done
		if t.Failed() {
			b, _ := os.ReadFile(sp.log)
			t.Logf("%s log:\n%s", name, b)
		}
	})
	testpoll.Until(t, 60*time.Second, func() error {
		res, err := http.Get(sp.url + "/readyz")
		if err == nil {
			res.Body.Close()
			if res.StatusCode == http.StatusOK {
				return nil
			}
			err = fmt.Errorf("/readyz answers %d", res.StatusCode)
		}
		select {
		case <-sp.done:
			b, _ := os.ReadFile(sp.log)
			t.Fatalf("%s exited at start:\n%s", name, b)
		default:
		}
		return fmt.Errorf("%s not ready (last: %v)", name, err)
	})
	return sp
}

func (sp *serveProcess) kill() {
	_ = sp.cmd.Process.Signal(syscall.SIGKILL)
	<-sp.done
}

// TestActledgerKilledMidCallOtherSettles runs two `actledger serve`
// processes with every role on the cluster and one supplier. Process A's
// calls reach the supplier, which makes the orders, but A never hears the
// answers: it is killed (SIGKILL) with those calls in flight and their
// leases held. Process B, still running, settles A's operations on its own
// (the lease expires, the lookup or the idempotent resend finds the order)
// along with the rest: every operation succeeds with exactly one order.
func TestActledgerKilledMidCallOtherSettles(t *testing.T) {
	t.Parallel()
	const n = 200
	const tenant = "Acme Corp."
	bin := buildActledger(t)
	c := testcluster.New(t)
	pool, dbURL := testdb.NewWithURL(t)
	prefix := testnats.Prefix()

	supplier := mocksupplier.New(mocksupplier.Config{})
	t.Cleanup(supplier.Close)
	gateA := &holdingGate{supplier: supplier, holding: true}
	srvA := httptest.NewServer(gateA)
	t.Cleanup(srvA.Close)
	srvB := httptest.NewServer(supplier)
	t.Cleanup(srvB.Close)

	a := startServe(t, bin, "A", dbURL, c.URLs(), prefix, srvA.URL, tenant)
	b := startServe(t, bin, "B", dbURL, c.URLs(), prefix, srvB.URL, tenant)

	store := ledger.New(pool, ledger.Config{})
	tokens, err := auth.New(pool, store, auth.Config{})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	acme := testfactory.NewTenant(t, tokens, tenant)
	agent, approver := acme.Agent, acme.Approver
	l := &load{url: b.url + "/v1/operations", token: agent.Secret}
	for i := range n {
		params := fmt.Sprintf(`{"sku":"kill-%d","qty":1}`, i)
		ap, err := store.CreateApproval(ctx, ledger.NewApproval{
			TenantID: approver.TenantID, ApproverTokenID: approver.TokenID, Action: testpipeline.Action,
			Params: []byte(params), PolicyVersion: "p1", ExpiresAt: time.Now().Add(time.Hour),
			Target: &ledger.Target{Account: "acct_test", Environment: "test"},
		})
		if err != nil {
			t.Fatal(err)
		}
		l.bodies = append(l.bodies, fmt.Sprintf(`{"action":%q,"key":"kill-%d","params":%s,"approval_id":%q}`,
			testpipeline.Action, i, params, ap.ID))
	}

	wait := l.start(t, 100)
	// A has calls in flight whose orders exist: kill it there.
	testpoll.Until(t, time.Minute, func() error {
		if n := len(gateA.heldKeys()); n < 2 {
			return fmt.Errorf("process A has %d calls in flight, want 2", n)
		}
		return nil
	})
	gateA.freeze()
	a.kill()
	held := gateA.heldKeys()
	t.Logf("killed A with %d calls in flight (orders made, answers withheld) after %d accepted", len(held), l.accepted.Load())
	wait()

	waitAllSucceeded(t, pool, n, time.Minute)
	checkOneOrderEach(t, pool, supplier, n)
	// A's operations were settled by B through the lease's expiry, not by
	// a second order.
	for _, key := range held {
		var kinds []string
		err := pool.QueryRow(ctx, `SELECT array_agg(e.kind ORDER BY e.seq) FROM operation_events e
			JOIN operations o ON o.id = e.operation_id WHERE o.external_key = $1`, key).Scan(&kinds)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Contains(kinds, string(ledger.EventLeaseExpired)) {
			t.Errorf("operation %s, held by A when it died, settled without its lease expiring: %v", key, kinds)
		}
		if n := supplier.Orders(key); n != 1 {
			t.Errorf("operation %s has %d orders, want 1", key, n)
		}
	}
}
