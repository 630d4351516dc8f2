// Command actchaos is a bounded soak of the whole system under random
// faults, ending with a check of the invariants actledger promises.
//
//	actchaos [-duration 5m] [-seed N] [-rate 20] [-bin bin] [-quiesce 3m]
//
// It runs, as separate OS processes, a three-node NATS JetStream cluster
// (internal/testcluster; streams at 3 replicas) and three `actledger serve`
// processes with the roles split (A: api,relay; B: dispatcher; C:
// dispatcher,reconciler), all reaching Postgres through TCP proxies it can
// cut. Postgres is a private primary started from the local PostgreSQL
// binaries (localpg.StartPrivate), so that it can be crashed too, with a
// synchronous standby (localpg.Private.Standby; -no-standby: none), and
// the processes' DATABASE_URL lists both hosts with
// target_session_attrs=read-write (-shared-postgres uses -database-url's
// server instead, never crashed). The mock supplier runs inside actchaos, so its order book is read
// directly; a third of the operations get a random supplier fault (a
// response dropped after commit, 503 with Retry-After, an answer slower
// than the timeout, a late commit, a stall, a 500 after commit), and every
// order sends a signed webhook some time later.
//
// An open-loop load submits approved operations at -rate a second to A.
// A seeded scheduler (the seed is printed; the same seed replays the same
// schedule) injects, every few seconds: SIGKILL and restart of an
// actledger process, SIGKILL and restart of a NATS node, a cut of every
// Postgres connection for a few seconds, SIGKILL of the Postgres
// server and its restart (crash recovery from the write-ahead log), and a
// failover: SIGKILL of the primary and promotion of its synchronous
// standby, which holds every commit the primary acknowledged, then a new
// synchronous standby where the old primary was. Then
// the load stops, everything is brought back, and actchaos waits (at most -quiesce) until
// no accepted operation is in flight, and checks:
//
//   - no operation has two orders at the supplier unless it is in review
//     as duplicate_effect;
//   - every accepted operation is in the ledger, and terminal or in review
//     with an owner and a deadline; none is dispatching;
//   - every order at the supplier is explained by an operation;
//   - every operation's event history is a path of ledger.Transitions.
//
// It prints a table and exits 1 on any violation. `make chaos
// DURATION=5m` builds the binaries and runs it; see docs/reliability.md.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/actledger/actledger/auth"
	"github.com/actledger/actledger/internal/mocksupplier"
	"github.com/actledger/actledger/internal/startstop"
	"github.com/actledger/actledger/internal/testcluster"
	"github.com/actledger/actledger/internal/testfactory"
	"github.com/actledger/actledger/internal/testproxy"
	"github.com/actledger/actledger/ledger"
	"github.com/actledger/actledger/schema"
)

const (
	action        = "supplier.create_order"
	tenant        = "Chaos Corp."
	webhookSecret = "whsec-chaos"
)

type options struct {
	duration, quiesce time.Duration
	seed              uint64
	rate              int
	bin               string
	adminURL          string
	// sharedPostgres runs on adminURL's server instead of a private
	// cluster: then Postgres is cut but never crashed.
	sharedPostgres bool
	// lyingSupplier makes the supplier ignore Idempotency-Key while the
	// providers file says it honours them: the contract actledger relies
	// on is broken, and the checker must say so (a check of the checker).
	lyingSupplier bool
	// noStandby runs the private Postgres without its synchronous
	// standby, and so without the failover fault.
	noStandby bool
}

func main() {
	var o options
	flag.DurationVar(&o.duration, "duration", 5*time.Minute, "how long the load and the faults run")
	flag.DurationVar(&o.quiesce, "quiesce", 3*time.Minute, "how long to wait for every operation to settle afterwards")
	flag.Uint64Var(&o.seed, "seed", uint64(time.Now().UnixNano()), "seed of the fault schedule and the supplier faults")
	flag.IntVar(&o.rate, "rate", 20, "operations submitted per second")
	flag.StringVar(&o.bin, "bin", "bin", "directory holding the actledger binary")
	flag.StringVar(&o.adminURL, "database-url", "postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable", "with -shared-postgres: the Postgres maintenance database (a fresh database is created beside it)")
	flag.BoolVar(&o.sharedPostgres, "shared-postgres", false, "use -database-url's server, which is cut but never crashed, instead of a private cluster from the local PostgreSQL binaries, which is also SIGKILLed and restarted")
	flag.BoolVar(&o.noStandby, "no-standby", false, "run the private Postgres without a synchronous standby (no failover fault)")
	flag.BoolVar(&o.lyingSupplier, "lying-supplier", false, "the supplier ignores idempotency keys its contract promises to honour (the checker must report duplicates)")
	flag.Parse()
	os.Exit(run(o))
}

// fatal is the panic value of env.Fatal: run recovers it, cleans up and
// exits 2.
type fatal struct{ msg string }

// env runs testcluster outside a test: its failures end the run.
type env struct {
	mu       sync.Mutex
	dir      string
	cleanups []func()
	n        int
}

func (e *env) Helper()                      {}
func (e *env) Fatal(args ...any)            { panic(fatal{fmt.Sprint(args...)}) }
func (e *env) Fatalf(f string, args ...any) { panic(fatal{fmt.Sprintf(f, args...)}) }
func (e *env) Logf(f string, args ...any)   { fmt.Fprintf(os.Stderr, f+"\n", args...) }
func (e *env) Cleanup(f func())             { e.mu.Lock(); e.cleanups = append(e.cleanups, f); e.mu.Unlock() }
func (e *env) Failed() bool                 { return false }
func (e *env) TempDir() string {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.n++
	d := filepath.Join(e.dir, fmt.Sprintf("%03d", e.n))
	if err := os.MkdirAll(d, 0o755); err != nil {
		panic(fatal{err.Error()})
	}
	return d
}

func (e *env) close() {
	e.mu.Lock()
	cs := e.cleanups
	e.cleanups = nil
	e.mu.Unlock()
	for i := len(cs) - 1; i >= 0; i-- {
		cs[i]()
	}
}

func run(o options) (code int) {
	dir, err := os.MkdirTemp("", "actchaos-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	e := &env{dir: dir}
	defer func() {
		if r := recover(); r != nil {
			f, ok := r.(fatal)
			if !ok {
				panic(r)
			}
			fmt.Fprintln(os.Stderr, "actchaos:", f.msg)
			code = 2
		}
		e.close()
		fmt.Fprintln(os.Stderr, "actchaos: logs and stores are in", dir)
	}()
	bin, err := filepath.Abs(filepath.Join(o.bin, "actledger"))
	if err != nil {
		e.Fatal(err)
	}
	if _, err := os.Stat(bin); err != nil {
		e.Fatalf("%v (run `make build` first, or `make chaos`)", err)
	}
	fmt.Printf("actchaos: seed %d, duration %s, %d ops/s\n", o.seed, o.duration, o.rate)
	s := newSoak(e, o, bin)
	s.setUp()
	s.load()
	s.settle()
	code = s.check()
	if code == 0 {
		s.dropDatabase()
	}
	return code
}

// --- actledger processes --------------------------------------------------

type process struct {
	name, roles string
	env         []string
	log         string
	mu          sync.Mutex
	cmd         *exec.Cmd
	done        chan struct{}
}

func (p *process) start(e *env, bin string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd != nil {
		return
	}
	f, err := os.OpenFile(p.log, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		e.Fatal(err)
	}
	cmd := exec.Command(bin, "serve", "--roles", p.roles)
	cmd.Env = append(os.Environ(), p.env...)
	cmd.Stdout, cmd.Stderr = f, f
	if err := cmd.Start(); err != nil {
		e.Fatal(err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); f.Close(); close(done) }()
	p.cmd, p.done = cmd, done
}

func (p *process) kill() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd == nil {
		return false
	}
	_ = p.cmd.Process.Signal(syscall.SIGKILL)
	<-p.done
	p.cmd = nil
	return true
}

// alive reports whether the process runs; one that exited on its own (it
// could not reach NATS or Postgres at start) is restarted by the caller.
func (p *process) alive() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd == nil {
		return false
	}
	select {
	case <-p.done:
		p.cmd = nil
		return false
	default:
		return true
	}
}

// --- the soak -------------------------------------------------------------

type soak struct {
	e   *env
	o   options
	bin string
	// loadRng picks the supplier faults (the load loop's own), schedRng
	// the scheduler's faults, so each sequence replays from the seed
	// whatever the other does.
	loadRng, schedRng *rand.Rand
	// pg is the private cluster the scheduler crashes; nil with
	// -shared-postgres.
	// pg is the private Postgres primary, standby its synchronous
	// standby (nil with -no-standby, or while a failover makes the next);
	// generation counts the standbys made after failovers.
	pg         *pgNode
	standby    *pgNode
	generation int
	pool       *pgxpool.Pool
	dbName     string
	// proxies stand between the actledger processes and each Postgres
	// host of their DATABASE_URL; the scheduler cuts them all at once.
	proxies  []*testproxy.Proxy
	cluster  *testcluster.Cluster
	supplier *mocksupplier.Server
	procs    []*process
	apiURL   string
	store    *ledger.Store
	tenant   testfactory.Tenant

	mu       sync.Mutex
	accepted map[string]string // operation id -> external key
	refused  int
	refusals []string
	faults   map[string]int
	supplied map[mocksupplier.FaultKind]int
}

func newSoak(e *env, o options, bin string) *soak {
	return &soak{e: e, o: o, bin: bin,
		loadRng:  rand.New(rand.NewPCG(o.seed, 1)),
		schedRng: rand.New(rand.NewPCG(o.seed, 2)),
		accepted: map[string]string{}, faults: map[string]int{}, supplied: map[mocksupplier.FaultKind]int{}}
}

func (s *soak) setUp() {
	e, ctx := s.e, context.Background()
	if !s.o.sharedPostgres {
		// A private cluster, crashed and restarted by the scheduler: the
		// machine's shared server must never be. Its owner (the postgres
		// system user, as root) must reach into the run's directory.
		if err := os.Chmod(e.dir, 0o755); err != nil {
			e.Fatal(err)
		}
		s.o.adminURL = s.startPostgres(ctx)
	}
	s.dbName = fmt.Sprintf("actchaos_%d", time.Now().Unix())
	admin, err := pgx.Connect(ctx, s.o.adminURL)
	if err != nil {
		e.Fatalf("connect to Postgres: %v", err)
	}
	if _, err := admin.Exec(ctx, "CREATE DATABASE "+s.dbName); err != nil {
		e.Fatal(err)
	}
	admin.Close(ctx)
	cfg, err := pgxpool.ParseConfig(s.o.adminURL)
	if err != nil {
		e.Fatal(err)
	}
	cfg.ConnConfig.Database = s.dbName
	schema.ConfigurePool(cfg)
	if s.pool, err = pgxpool.NewWithConfig(ctx, cfg); err != nil {
		e.Fatal(err)
	}
	e.Cleanup(s.pool.Close)
	if _, err := schema.Migrate(ctx, s.pool, slog.New(slog.DiscardHandler)); err != nil {
		e.Fatal(err)
	}
	s.store = ledger.New(s.pool, ledger.Config{})
	tokens, err := auth.New(s.pool, s.store, auth.Config{})
	if err != nil {
		e.Fatal(err)
	}
	s.tenant = testfactory.NewTenant(e, tokens, tenant)

	// Every actledger process reaches each Postgres host through a proxy,
	// which the scheduler cuts; actchaos itself checks the ledger
	// directly.
	targets := []string{fmt.Sprintf("%s:%d", cfg.ConnConfig.Host, cfg.ConnConfig.Port)}
	for _, f := range cfg.ConnConfig.Fallbacks {
		// sslmode prefer and allow list each host twice (with TLS and without).
		if t := fmt.Sprintf("%s:%d", f.Host, f.Port); !slices.Contains(targets, t) {
			targets = append(targets, t)
		}
	}
	var hosts []string
	for _, target := range targets {
		p := testproxy.New(e, target)
		s.proxies = append(s.proxies, p)
		hosts = append(hosts, p.Addr())
	}
	s.cluster = testcluster.New(e)
	fmt.Printf("actchaos: nats-server %s (sync_interval always: %v), database %s\n", s.cluster.Version, s.cluster.SyncAlways, s.dbName)

	apiAddr := fmt.Sprintf("127.0.0.1:%d", testcluster.FreePorts(e, 1)[0])
	s.apiURL = "http://" + apiAddr

	mode := mocksupplier.Honour
	if s.o.lyingSupplier {
		mode = mocksupplier.Ignore
	}
	s.supplier = mocksupplier.New(mocksupplier.Config{Idempotency: mode, LookupLag: 500 * time.Millisecond,
		Webhook: &mocksupplier.WebhookConfig{URL: s.apiURL + "/v1/webhooks/acme", Secret: webhookSecret, Delay: 3 * time.Second}})
	supplierLn, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		e.Fatal(err)
	}
	supplierSrv := &http.Server{Handler: s.supplier}
	go func() { _ = supplierSrv.Serve(supplierLn) }()
	e.Cleanup(func() { supplierSrv.Close(); s.supplier.Close() })

	providers := filepath.Join(e.dir, "providers.yaml")
	if err := os.WriteFile(providers, []byte(providersYAML("http://"+supplierLn.Addr().String())), 0o644); err != nil {
		e.Fatal(err)
	}
	dbURL := multiHost(cfg.ConnConfig.User, hosts, s.dbName)
	common := []string{"DATABASE_URL=" + dbURL, "NATS_URL=" + s.cluster.URLs(), "STREAM_REPLICAS=3",
		"STREAM_PREFIX=CHAOS", "PROVIDERS_FILE=" + providers, "LEASE_DURATION=3s", "DISPATCH_CONCURRENCY=8",
		"ACME_WEBHOOK_SECRET=" + webhookSecret, "EVIDENCE_UNAPPLIED_AFTER=10s", "LOG_LEVEL=info"}
	for _, p := range []struct{ name, roles string }{{"A", "api,relay"}, {"B", "dispatcher"}, {"C", "dispatcher,reconciler"}} {
		pr := &process{name: p.name, roles: p.roles, log: filepath.Join(e.dir, "actledger-"+p.name+".log"),
			env: append(append([]string(nil), common...), "LISTEN_ADDR="+apiAddr)}
		s.procs = append(s.procs, pr)
	}
	e.Cleanup(func() {
		for _, p := range s.procs {
			p.kill()
		}
	})
	// A first: it creates the streams, which the others then find. A
	// process that gave up at start (the cluster still electing) is
	// started again.
	s.procs[0].start(e, s.bin)
	deadline := time.Now().Add(time.Minute)
	for !s.apiReady() {
		if time.Now().After(deadline) {
			e.Fatalf("actledger A is not ready after a minute; see %s", s.procs[0].log)
		}
		if !s.procs[0].alive() {
			s.procs[0].start(e, s.bin)
		}
		time.Sleep(200 * time.Millisecond)
	}
	for _, p := range s.procs[1:] {
		p.start(e, s.bin)
	}
}

// dropDatabase removes the soak's database after a clean run (a run with
// violations keeps it, for inspection).
func (s *soak) dropDatabase() {
	for _, p := range s.procs {
		p.kill()
	}
	s.pool.Close()
	ctx := context.Background()
	admin, err := pgx.Connect(ctx, s.o.adminURL)
	if err != nil {
		return
	}
	defer admin.Close(ctx)
	_, _ = admin.Exec(ctx, "DROP DATABASE IF EXISTS "+s.dbName+" WITH (FORCE)")
}

func (s *soak) apiReady() bool {
	res, err := http.Get(s.apiURL + "/readyz")
	if err != nil {
		return false
	}
	res.Body.Close()
	return res.StatusCode == http.StatusOK
}

func providersYAML(baseURL string) string {
	return fmt.Sprintf(`providers:
  acme:
    base_url: %s
    account: acct_chaos
    environment: test
    timeout: 1s
    create: {method: POST, path: /v1/orders}
    reference_param: client_reference
    reference_field: id
    idempotency: {header: Idempotency-Key, retention: 24h}
    lookup: {path: "/v1/orders?client_reference={reference}", visibility_lag: 500ms}
    webhook_secret_env: ACME_WEBHOOK_SECRET
    retry: {max_attempts: 20, initial: 100ms, max: 2s, max_elapsed: 5m}
    tenant: %q
    review: {owner: supply-ops, deadline: 4h}
actions:
  %s: {provider: acme}
`, baseURL, tenant, action)
}

// supplierFaults are the faults a third of the operations get.
var supplierFaults = []mocksupplier.Fault{
	{Kind: mocksupplier.DropAfterCommit},
	{Kind: mocksupplier.Error500AfterCommit},
	{Kind: mocksupplier.UnavailableBeforeCommit, RetryAfterS: 1},
	{Kind: mocksupplier.Delay, MS: 1500},
	{Kind: mocksupplier.CommitLate, MS: 1500},
	{Kind: mocksupplier.StallBeforeCommit, MS: 1500},
}

// load runs the open-loop load and the fault scheduler for the duration.
func (s *soak) load() {
	ctx, cancel := context.WithTimeout(context.Background(), s.o.duration)
	defer cancel()
	var wg sync.WaitGroup
	wg.Go(func() { s.schedule(ctx) })
	client := &http.Client{Timeout: 10 * time.Second}
	tick := time.NewTicker(time.Second / time.Duration(s.o.rate))
	defer tick.Stop()
	for i := 0; ; i++ {
		select {
		case <-ctx.Done():
			wg.Wait()
			return
		case <-tick.C:
		}
		var fault *mocksupplier.Fault
		if s.loadRng.IntN(3) == 0 {
			f := supplierFaults[s.loadRng.IntN(len(supplierFaults))]
			fault = &f
		}
		wg.Go(func() { s.submit(client, i, fault) })
	}
}

func (s *soak) submit(client *http.Client, i int, fault *mocksupplier.Fault) {
	ctx := context.Background()
	params := fmt.Sprintf(`{"sku":"chaos-%d","qty":1}`, i)
	ap, err := s.store.CreateApproval(ctx, ledger.NewApproval{TenantID: s.tenant.ID, ApproverTokenID: s.tenant.Approver.TokenID,
		Action: action, Params: []byte(params), PolicyVersion: "p1", ExpiresAt: time.Now().Add(time.Hour),
		Target: &ledger.Target{Account: "acct_chaos", Environment: "test"}})
	if err != nil {
		s.refuse("approval: " + err.Error())
		return
	}
	body := fmt.Sprintf(`{"action":%q,"key":"chaos-%d","params":%s,"approval_id":%q}`, action, i, params, ap.ID)
	req, _ := http.NewRequest("POST", s.apiURL+"/v1/operations", strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+s.tenant.Agent.Secret)
	res, err := client.Do(req)
	if err != nil {
		s.refuse(err.Error())
		return
	}
	defer res.Body.Close()
	var out struct {
		ID          string `json:"id"`
		ExternalKey string `json:"external_key"`
	}
	if res.StatusCode != http.StatusCreated || json.NewDecoder(res.Body).Decode(&out) != nil {
		s.refuse(res.Status)
		return
	}
	if fault != nil {
		s.supplier.SetFaults(out.ExternalKey, *fault)
	}
	s.mu.Lock()
	s.accepted[out.ID] = out.ExternalKey
	if fault != nil {
		s.supplied[fault.Kind]++
	}
	s.mu.Unlock()
}

// refuse counts a submission the system did not accept, keeping the
// first reason of each kind for the table.
func (s *soak) refuse(why string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.refused++
	if len(s.refusals) < 5 && !slices.Contains(s.refusals, why) {
		s.refusals = append(s.refusals, why)
	}
}

func (s *soak) intn(n int) int { return s.schedRng.IntN(n) }

// schedule injects a fault every 5-15 s: it picks one, applies it, waits
// a few seconds, and repairs it.
func (s *soak) schedule(ctx context.Context) {
	for {
		wait := time.Duration(5+s.intn(11)) * time.Second
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
		outage := time.Duration(2+s.intn(5)) * time.Second
		var kind string
		faults := 4
		if s.pg != nil {
			faults = 5
		}
		if s.standby != nil {
			faults = 6
		}
		switch s.intn(faults) {
		case 0:
			p := s.procs[s.intn(len(s.procs))]
			kind = "sigkill actledger " + p.name
			p.kill()
			startstop.Sleep(ctx, outage)
			p.start(s.e, s.bin)
		case 1:
			n := s.cluster.Nodes[s.intn(len(s.cluster.Nodes))]
			kind = "sigkill nats " + n.Name
			s.cluster.Kill(n)
			startstop.Sleep(ctx, outage)
			s.cluster.Start(n)
		case 2:
			kind = "cut postgres"
			for _, p := range s.proxies {
				p.Cut()
			}
			startstop.Sleep(ctx, outage)
			for _, p := range s.proxies {
				p.Restore()
			}
		case 5:
			kind = s.failover(ctx, outage)
		case 4:
			// A crash of the database: the WAL is all that survives, and
			// crash recovery replays it when it starts again.
			kind = "sigkill postgres"
			if err := s.pg.Kill(); err != nil {
				kind = "sigkill postgres failed: " + err.Error()
				break
			}
			startstop.Sleep(ctx, outage)
			if err := s.pg.Start(context.WithoutCancel(ctx)); err != nil {
				s.e.Fatalf("restart Postgres after its crash: %v", err)
			}
		case 3:
			kind = "operator pause"
			if !s.dispatchControl("pause") {
				kind = "operator pause refused (API down)"
				break
			}
			startstop.Sleep(ctx, outage)
			s.resume()
		}
		fmt.Printf("actchaos: %s for %s\n", kind, outage)
		s.mu.Lock()
		s.faults[kind]++
		s.mu.Unlock()
		// A process that exited on its own (it could not reach NATS or
		// Postgres while starting) is started again.
		for _, p := range s.procs {
			if !p.alive() {
				p.start(s.e, s.bin)
			}
		}
	}
}

// dispatchControl asks the API, as an operator, to pause or resume the
// dispatch of provider acme; it reports whether the API did.
func (s *soak) dispatchControl(verb string) bool {
	req, _ := http.NewRequest("POST", s.apiURL+"/v1/dispatch/"+verb, strings.NewReader(`{"provider":"acme"}`))
	req.Header.Set("Authorization", "Bearer "+s.tenant.Operator.Secret)
	req.Header.Set("Content-Type", "application/json")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		return false
	}
	res.Body.Close()
	return res.StatusCode == http.StatusOK
}

// resume resumes dispatch, retrying while the API is down (killed by the
// scheduler, or Postgres cut): a pause left in place would hold the rest
// of the run.
func (s *soak) resume() {
	for !s.dispatchControl("resume") {
		for _, p := range s.procs {
			if !p.alive() {
				p.start(s.e, s.bin)
			}
		}
		time.Sleep(500 * time.Millisecond)
	}
}

// settle brings everything back and waits until no accepted operation is
// in flight.
func (s *soak) settle() {
	for _, p := range s.proxies {
		p.Restore()
	}
	for _, n := range s.cluster.Nodes {
		if !n.Running() {
			s.cluster.Start(n)
		}
	}
	deadline := time.Now().Add(s.o.quiesce)
	for {
		for _, p := range s.procs {
			if !p.alive() {
				p.start(s.e, s.bin)
			}
		}
		var inFlight int
		err := s.pool.QueryRow(context.Background(),
			`SELECT count(*) FROM operations WHERE status IN ('queued','dispatching','retry_wait','unknown')`).Scan(&inFlight)
		if err == nil && inFlight == 0 {
			return
		}
		if time.Now().After(deadline) {
			fmt.Printf("actchaos: %d operations still in flight after %s of quiescence\n", inFlight, s.o.quiesce)
			return
		}
		time.Sleep(time.Second)
	}
}
