// Command peers measures River and Watermill doing actledger's job on this
// machine, in the same run as actledger's own end-to-end stage, and prints
// one table with actledger's ratio to each peer.
//
// The job, for every peer: insert an operation row and the peer's job or
// outbox message in one Postgres transaction; a worker POSTs the order to
// the mock supplier (fast mode, Idempotency-Key honoured) with the
// operation's key; the worker marks the operation row succeeded. The
// figures are the completed operations per second in a closed loop (16
// clients, at most 500 operations ahead of the workers), p50/p99
// enqueue→succeeded at 1,000 operations/s offered (open loop), and the
// operations whose key did not produce exactly one order at the supplier.
// A second table says where the CPU went per operation completed in the
// closed loop (Postgres, the benchmark's process, nats-server) and how much
// WAL each operation wrote: the figures that explain the rates.
//
// It is its own Go module so the product's go.mod never depends on the
// peers. Run it with `make bench-peers`.
package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"os/signal"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/actledger/actledger/internal/mocksupplier"
	"github.com/actledger/actledger/internal/resources"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// plan is how long and how hard each peer is driven.
type plan struct {
	Clients      int
	Backlog      int
	Closed       time.Duration
	Rate         float64
	Open         time.Duration
	OpenClients  int
	Settle       time.Duration
	DatabaseURL  string
	NATSURL      string
	Rounds       int
	RunActledger bool
	Root         string
	ActbenchArgs []string
	// StatementEvery, when above 0, adds a system: actledger's stage
	// again with a statement run on that schedule beside the load
	// (actbench --reconcile-every), reported against actledger without.
	StatementEvery time.Duration
}

// peer is one system doing the job. Start prepares it against a fresh
// database; Enqueue runs the one transaction that inserts the operation
// row and the peer's job or outbox message; Stop releases everything.
type peer interface {
	Name() string
	Start(ctx context.Context, pool *pgxpool.Pool, dbURL string, done func(id string)) error
	Enqueue(ctx context.Context, id string) error
	Stop(ctx context.Context)
}

// createOperations is the operation table every peer writes: the row the
// job marks succeeded.
const createOperations = `
CREATE TABLE operations (
	id          text PRIMARY KEY,
	state       text NOT NULL DEFAULT 'pending',
	order_id    text,
	created_at  timestamptz NOT NULL DEFAULT now(),
	succeeded_at timestamptz
)`

// insertOperation is the operation row of one enqueue.
const insertOperation = `INSERT INTO operations (id) VALUES ($1)`

// markSucceeded records the supplier's order on the operation row.
const markSucceeded = `UPDATE operations SET state = 'succeeded', order_id = $2, succeeded_at = now() WHERE id = $1 AND state = 'pending'`

// countOpen counts the operations no worker finished.
const countOpen = `SELECT count(*) FROM operations WHERE state <> 'succeeded'`

// databasePrefix begins the name of every peer's scratch database; the
// CPU meter counts the Postgres backends of those databases.
const databasePrefix = "peers_"

// result is one peer's figures.
type result struct {
	Name       string
	OpsPerSec  float64
	P50, P99   time.Duration
	Abandoned  int
	Duplicates int
	Open       int
	Cost       cost // over the closed loop's window
	Err        error
}

// cost is what one completed operation cost the machine in the closed
// loop: CPU milliseconds by who spent them (the same number as actbench's
// CPU seconds per 1,000 operations) and WAL bytes. On shared cores the
// rate is bounded by their sum, so they say why one system completes more
// than another.
type cost struct {
	// PostgresMS is the CPU of the backends of the system's database and
	// of the server's own processes (WAL writer, checkpointer…).
	PostgresMS float64
	// ProcessMS is the benchmark's process: the system itself (its
	// workers, or actledger's API, relay and dispatcher), the mock
	// supplier and the load generator.
	ProcessMS float64
	NATSMS    float64 // nats-server
	WALBytes  float64 // server-wide, per operation
}

// total is the CPU of one operation, all three together.
func (c cost) total() float64 { return c.PostgresMS + c.ProcessMS + c.NATSMS }

// costPerOp divides what was used over a window by the operations it
// completed; nothing for no operations.
func costPerOp(u resources.Use, walBytes int64, ops int) cost {
	if ops == 0 {
		return cost{}
	}
	per := func(d time.Duration) float64 { return ms(d) / float64(ops) }
	return cost{PostgresMS: per(u.Postgres), ProcessMS: per(u.Self), NATSMS: per(u.NATS), WALBytes: float64(walBytes) / float64(ops)}
}

var started = time.Now()

func logf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "[%6.1fs] %s\n", time.Since(started).Seconds(), fmt.Sprintf(format, args...))
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:])
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "peers:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("peers", flag.ContinueOnError)
	var pl plan
	fs.IntVar(&pl.Clients, "clients", 16, "closed-loop clients")
	fs.IntVar(&pl.Backlog, "backlog", 500, "operations a closed loop may hold ahead of the workers")
	// The defaults are actbench's full-length end-to-end stage's, so that
	// every system is measured for the same time.
	fs.DurationVar(&pl.Closed, "closed", 6*time.Second, "closed-loop duration per peer (actbench's maximum runs 6s)")
	fs.Float64Var(&pl.Rate, "rate", 1000, "operations/s offered in the open loop")
	fs.DurationVar(&pl.Open, "open", 8*time.Second, "open-loop duration per peer (actbench's open loop runs 8s)")
	fs.DurationVar(&pl.Settle, "settle", 60*time.Second, "how long to wait for the workers to drain")
	fs.BoolVar(&pl.RunActledger, "actledger", true, "also run `go run ./cmd/actbench --stages e2e --reps 1` from the repository root")
	riverWorkers := fs.Int("river-workers", 16, "River's MaxWorkers")
	riverCooldown := fs.Duration("river-fetch-cooldown", 5*time.Millisecond, "River's FetchCooldown (River's default, 100ms, caps 16 workers at 160 jobs/s)")
	actbenchArgs := fs.String("actbench-args", "--stages e2e --reps 1", "actbench's arguments: its full-length end-to-end stage (8s open loop, 6s closed loop); \"--quick --stages e2e\" is a 2s smoke run")
	fs.StringVar(&pl.Root, "root", "../..", "the actledger repository root, where actbench runs")
	peersFlag := fs.String("peers", "river,watermill", "comma-separated peers to run: river,watermill")
	fs.DurationVar(&pl.StatementEvery, "statement-every", 10*time.Second, "also run actledger's stage with a statement run on this schedule beside the load, and compare it with the stage without (0: do not)")
	fs.IntVar(&pl.Rounds, "rounds", 3, "rounds: every system runs once per round, in an order that rotates, and the table shows medians")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if pl.Rounds < 1 {
		return fmt.Errorf("-rounds must be at least 1, got %d", pl.Rounds)
	}
	pl.ActbenchArgs = strings.Fields(*actbenchArgs)
	pl.OpenClients = 128
	pl.DatabaseURL = envOr("BENCH_DATABASE_URL", "postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable")
	pl.NATSURL = envOr("BENCH_NATS_URL", "nats://127.0.0.1:4222")

	sup, supURL, closeSup, err := startSupplier()
	if err != nil {
		return err
	}
	defer closeSup()

	// Each system is a function that measures it once, from a fresh start.
	var systems []func() result
	for _, name := range strings.Split(*peersFlag, ",") {
		var newPeer func() peer
		switch strings.TrimSpace(name) {
		case "river":
			newPeer = func() peer { return newRiver(supURL, *riverWorkers, *riverCooldown) }
		case "watermill":
			newPeer = func() peer { return newWatermill(supURL, pl.NATSURL, pl.Clients) }
		default:
			return fmt.Errorf("unknown peer %q", name)
		}
		systems = append(systems, func() result {
			sup.Reset()
			return measure(ctx, pl, newPeer(), sup)
		})
	}
	if pl.RunActledger {
		systems = append(systems, func() result { return runActledger(ctx, pl, "actledger", pl.ActbenchArgs) })
		if pl.StatementEvery > 0 {
			args := append(slices.Clone(pl.ActbenchArgs), "--reconcile-every", pl.StatementEvery.String())
			systems = append(systems, func() result { return runActledger(ctx, pl, statementSystem(pl), args) })
		}
	}

	var rounds [][]result
	for round := range pl.Rounds {
		logf("round %d/%d", round+1, pl.Rounds)
		results := make([]result, len(systems))
		// The order rotates, so that no system always runs first on a
		// cold machine or last on a warm one.
		for i := range systems {
			k := (i + round) % len(systems)
			results[k] = systems[k]()
			if results[k].Err != nil {
				logf("%s: %v", results[k].Name, results[k].Err)
			}
			if ctx.Err() != nil {
				return ctx.Err()
			}
		}
		rounds = append(rounds, results)
	}
	printTable(os.Stdout, pl, rounds)
	return nil
}

func envOr(k, def string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return def
}

// startSupplier serves a mock supplier in fast mode (no faults, keys
// honoured) on a loopback port, as actbench does.
func startSupplier() (*mocksupplier.Server, string, func(), error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, "", nil, fmt.Errorf("mock supplier: %w", err)
	}
	sup := mocksupplier.New(mocksupplier.Config{})
	srv := &http.Server{Handler: sup, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	return sup, "http://" + ln.Addr().String(), func() { _ = srv.Close(); sup.Close() }, nil
}

// supplierClient POSTs one order per operation with the operation's id as
// both client_reference and Idempotency-Key, the call every peer's worker
// makes.
type supplierClient struct {
	url string
	hc  *http.Client
}

func newSupplierClient(base string, conns int) *supplierClient {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConnsPerHost = conns * 2
	return &supplierClient{url: base + "/v1/orders", hc: &http.Client{Transport: tr, Timeout: 5 * time.Second}}
}

// order creates the order of operation id and returns the supplier's id.
func (c *supplierClient) order(ctx context.Context, id string) (string, error) {
	body := fmt.Sprintf(`{"client_reference":%q,"sku":"bench-widget","quantity":1}`, id)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.url, strings.NewReader(body))
	if err != nil {
		return "", err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Idempotency-Key", id)
	resp, err := c.hc.Do(req)
	if err != nil {
		return "", fmt.Errorf("supplier: %w", err)
	}
	defer resp.Body.Close()
	var buf bytes.Buffer
	_, _ = buf.ReadFrom(resp.Body)
	if resp.StatusCode != http.StatusCreated {
		return "", fmt.Errorf("supplier: status %d: %s", resp.StatusCode, buf.String())
	}
	m := orderIDRe.FindSubmatch(buf.Bytes())
	if m == nil {
		return "", errors.New("supplier: no order id in answer")
	}
	return string(m[1]), nil
}

var orderIDRe = regexp.MustCompile(`"id":"([^"]+)"`)

// tracker times every operation from the start of its enqueue to the
// moment its worker marked it succeeded, and bounds the operations in
// flight.
type tracker struct {
	mu      sync.Mutex
	start   map[string]time.Time
	lat     []time.Duration
	done    int
	window  *time.Time // completions counted only after this instant
	until   time.Time  // and not after this one
	counted int
	slots   chan struct{}
}

func newTracker(backlog int) *tracker {
	return &tracker{start: make(map[string]time.Time), slots: make(chan struct{}, backlog)}
}

func (t *tracker) begin(id string) {
	t.mu.Lock()
	t.start[id] = time.Now()
	t.mu.Unlock()
}

// finish is the peers' done callback; a repeated finish (a redelivery)
// counts once.
func (t *tracker) finish(id string) {
	now := time.Now()
	t.mu.Lock()
	s, ok := t.start[id]
	if ok {
		delete(t.start, id)
		t.lat = append(t.lat, now.Sub(s))
		t.done++
		if t.window != nil && now.After(*t.window) && !now.After(t.until) {
			t.counted++
		}
	}
	t.mu.Unlock()
	if ok {
		select {
		case <-t.slots:
		default:
		}
	}
}

func (t *tracker) pending() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.start)
}

// measure runs one peer against a scratch database: a closed loop for the
// maximum, then an open loop for the latency, then counts duplicates.
func measure(ctx context.Context, pl plan, p peer, sup *mocksupplier.Server) result {
	res := result{Name: p.Name()}
	dbName := fmt.Sprintf("%s%s_%d", databasePrefix, strings.ToLower(p.Name()), time.Now().UnixNano())
	dbURL, drop, err := scratchDB(ctx, pl.DatabaseURL, dbName)
	if err != nil {
		res.Err = err
		return res
	}
	defer drop()
	cfg, err := pgxpool.ParseConfig(dbURL)
	if err != nil {
		res.Err = err
		return res
	}
	cfg.MaxConns = int32(pl.Clients*2 + 8)
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		res.Err = err
		return res
	}
	defer pool.Close()
	warnOldTransactions(ctx, pool)
	if _, err := pool.Exec(ctx, createOperations); err != nil {
		res.Err = fmt.Errorf("create operations: %w", err)
		return res
	}
	// The WAL position is read on a connection of its own, so that a
	// saturated pool does not shift the window it measures.
	walConn, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		res.Err = fmt.Errorf("postgres: %w", err)
		return res
	}
	defer walConn.Close(context.WithoutCancel(ctx))

	var cur *tracker
	var curMu sync.Mutex
	done := func(id string) {
		curMu.Lock()
		t := cur
		curMu.Unlock()
		if t != nil {
			t.finish(id)
		}
	}
	use := func(t *tracker) { curMu.Lock(); cur = t; curMu.Unlock() }
	if err := p.Start(ctx, pool, dbURL, done); err != nil {
		res.Err = fmt.Errorf("start: %w", err)
		return res
	}
	defer p.Stop(context.Background())

	var ids []string
	var idsMu sync.Mutex
	enqueue := func(t *tracker, id string) error {
		t.begin(id)
		idsMu.Lock()
		ids = append(ids, id)
		idsMu.Unlock()
		return p.Enqueue(ctx, id)
	}

	// Closed loop: pl.Clients clients, each enqueueing as soon as the last
	// transaction committed and a slot is free.
	logf("%s: closed loop, %d clients, %s, at most %d ahead", res.Name, pl.Clients, pl.Closed, pl.Backlog)
	t := newTracker(pl.Backlog)
	use(t)
	warm := time.Now().Add(time.Second)
	t.window = &warm
	end := warm.Add(pl.Closed)
	t.until = end
	var wg sync.WaitGroup
	var firstErr error
	var errMu sync.Mutex
	seq := 0
	var seqMu sync.Mutex
	for c := 0; c < pl.Clients; c++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for time.Now().Before(end) && ctx.Err() == nil {
				select {
				case t.slots <- struct{}{}:
				case <-ctx.Done():
					return
				}
				seqMu.Lock()
				seq++
				id := fmt.Sprintf("c%07d", seq)
				seqMu.Unlock()
				if err := enqueue(t, id); err != nil {
					errMu.Lock()
					if firstErr == nil {
						firstErr = err
					}
					errMu.Unlock()
					return
				}
			}
		}()
	}
	// The cost is measured over the window the rate counts, warm-up left
	// out, and divided by the same completions.
	spent, walBytes, costErr := measureWindow(ctx, walConn, warm, end)
	wg.Wait()
	t.mu.Lock()
	res.OpsPerSec = float64(t.counted) / pl.Closed.Seconds()
	res.Cost = costPerOp(spent, walBytes, t.counted)
	t.mu.Unlock()
	if firstErr != nil {
		res.Err = fmt.Errorf("closed loop: %w", firstErr)
		return res
	}
	if costErr != nil {
		res.Err = fmt.Errorf("closed loop: %w", costErr)
		return res
	}
	if !drain(ctx, t, pl.Settle) {
		res.Err = fmt.Errorf("closed loop: %d operations not done after %s", t.pending(), pl.Settle)
		return res
	}
	logf("%s: %.0f ops/s; CPU ms/op Postgres %.3f, process %.3f, nats-server %.3f; WAL %.0f bytes/op", res.Name, res.OpsPerSec,
		res.Cost.PostgresMS, res.Cost.ProcessMS, res.Cost.NATSMS, res.Cost.WALBytes)

	// Open loop: pl.Rate operations/s offered on a schedule. As in
	// actbench's open loop, an operation is abandoned (not sent, counted)
	// when at its turn it is over a second late or over a second of the
	// offered rate is in flight, so that an overloaded system's latencies
	// are those of a backlog of at most a second, whichever system it is.
	logf("%s: open loop, %.0f/s offered, %s", res.Name, pl.Rate, pl.Open)
	t = newTracker(1 << 30)
	use(t)
	n := int(pl.Rate * pl.Open.Seconds())
	interval := time.Duration(float64(time.Second) / pl.Rate)
	work := make(chan time.Time, n)
	abandoned := 0
	maxPending := int(pl.Rate)
	var abMu sync.Mutex
	for c := 0; c < pl.OpenClients; c++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for due := range work {
				if time.Since(due) > time.Second || t.pending() > maxPending {
					abMu.Lock()
					abandoned++
					abMu.Unlock()
					continue
				}
				seqMu.Lock()
				seq++
				id := fmt.Sprintf("o%07d", seq)
				seqMu.Unlock()
				if err := enqueue(t, id); err != nil {
					errMu.Lock()
					if firstErr == nil {
						firstErr = err
					}
					errMu.Unlock()
				}
			}
		}()
	}
	t0 := time.Now()
	for i := 0; i < n && ctx.Err() == nil; i++ {
		due := t0.Add(time.Duration(i) * interval)
		time.Sleep(time.Until(due))
		work <- due
	}
	close(work)
	wg.Wait()
	res.Abandoned = abandoned
	if firstErr != nil {
		res.Err = fmt.Errorf("open loop: %w", firstErr)
		return res
	}
	if !drain(ctx, t, pl.Settle) {
		res.Err = fmt.Errorf("open loop: %d operations not done after %s", t.pending(), pl.Settle)
		return res
	}
	t.mu.Lock()
	lat := slices.Clone(t.lat)
	t.mu.Unlock()
	slices.Sort(lat)
	res.P50, res.P99 = quantile(lat, 0.50), quantile(lat, 0.99)
	logf("%s: p50 %s p99 %s", res.Name, res.P50, res.P99)

	use(nil)
	for _, id := range ids {
		if sup.Orders(id) != 1 {
			res.Duplicates++
		}
	}
	if err := pool.QueryRow(ctx, countOpen).Scan(&res.Open); err != nil {
		res.Err = fmt.Errorf("count open: %w", err)
	}
	return res
}

// measureWindow waits until from, then measures the CPU used and the WAL
// written until to.
func measureWindow(ctx context.Context, conn *pgx.Conn, from, to time.Time) (resources.Use, int64, error) {
	if err := sleepUntil(ctx, from); err != nil {
		return resources.Use{}, 0, err
	}
	wal, err := resources.MarkWAL(ctx, conn)
	if err != nil {
		return resources.Use{}, 0, err
	}
	meter := resources.Start(databasePrefix)
	if err := sleepUntil(ctx, to); err != nil {
		return resources.Use{}, 0, err
	}
	use := meter.Stop()
	n, err := wal.Bytes(ctx)
	return use, n, err
}

// oldTransactions lists the server's transactions that have held a
// snapshot for more than a few seconds, in any database.
const oldTransactions = `SELECT pid, coalesce(datname, ''), state, extract(epoch FROM now() - xact_start)::int
FROM pg_stat_activity
WHERE backend_xmin IS NOT NULL AND xact_start < now() - interval '5 seconds' AND pid <> pg_backend_pid()`

// warnOldTransactions logs every transaction that has stayed open for
// more than a few seconds anywhere on the server. Watermill's Postgres
// reader only takes rows written before the server's oldest open snapshot,
// so such a transaction (a client left idle in transaction, a long test)
// stalls its forwarder for as long as it stays open, and the run then
// measures that client rather than Watermill.
func warnOldTransactions(ctx context.Context, pool *pgxpool.Pool) {
	rows, _ := pool.Query(ctx, oldTransactions)
	var (
		pid         int
		db, state   string
		openSeconds int
	)
	_, err := pgx.ForEachRow(rows, []any{&pid, &db, &state, &openSeconds}, func() error {
		logf("warning: backend %d (database %q, %s) has held a transaction open for %d s; it stalls Watermill's reader and skews every system's figures",
			pid, db, state, openSeconds)
		return nil
	})
	if err != nil {
		logf("warning: cannot list old transactions: %v", err)
	}
}

// sleepUntil returns at instant t, or earlier with ctx's error.
func sleepUntil(ctx context.Context, t time.Time) error {
	timer := time.NewTimer(time.Until(t))
	defer timer.Stop()
	select {
	case <-timer.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// drain waits, polling, until every enqueued operation is done.
func drain(ctx context.Context, t *tracker, limit time.Duration) bool {
	deadline := time.Now().Add(limit)
	for time.Now().Before(deadline) && ctx.Err() == nil {
		if t.pending() == 0 {
			return true
		}
		time.Sleep(20 * time.Millisecond)
	}
	return t.pending() == 0
}

func quantile(sorted []time.Duration, q float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := int(q*float64(len(sorted))+0.5) - 1
	i = max(0, min(i, len(sorted)-1))
	return sorted[i]
}

// scratchDB creates database name and returns its URL and a function that
// drops it.
func scratchDB(ctx context.Context, adminURL, name string) (string, func(), error) {
	conn, err := pgx.Connect(ctx, adminURL)
	if err != nil {
		return "", nil, fmt.Errorf("postgres: %w", err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{name}.Sanitize()); err != nil {
		return "", nil, fmt.Errorf("create database %s: %w", name, err)
	}
	pu, err := url.Parse(adminURL)
	if err != nil {
		return "", nil, err
	}
	pu.Path = "/" + name
	u := pu.String()
	drop := func() {
		c, err := pgx.Connect(context.Background(), adminURL)
		if err != nil {
			logf("drop %s: %v", name, err)
			return
		}
		defer c.Close(context.Background())
		if _, err := c.Exec(context.Background(), "DROP DATABASE IF EXISTS "+pgx.Identifier{name}.Sanitize()+" WITH (FORCE)"); err != nil {
			logf("drop %s: %v", name, err)
		}
	}
	return u, drop, nil
}

// runActledger runs actbench's end-to-end stage (one repetition) from the
// repository root and reads its figures from the report.
func runActledger(ctx context.Context, pl plan, name string, actbenchArgs []string) result {
	res := result{Name: name}
	args := append([]string{"run", "./cmd/actbench"}, actbenchArgs...)
	logf("actledger: go %s", strings.Join(args, " "))
	cmd := exec.CommandContext(ctx, "go", args...)
	cmd.Dir = pl.Root
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		res.Err = fmt.Errorf("actbench: %w", err)
		return res
	}
	fmt.Fprintf(os.Stderr, "%s", out)
	res.Err = parseActbench(out, &res)
	return res
}

// parseActbench reads the end-to-end lines of actbench's report. A row
// that begins with a row number (not with the table's padding) starts a
// stage, and the rows under it belong to it until the next one or a
// blank line: a figure with a section is read only within the stage whose
// first row contains it, since labels such as "WAL bytes/op" repeat.
func parseActbench(out []byte, res *result) error {
	found := make([]bool, len(actbenchFigures))
	stage := ""
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		line := sc.Text()
		if line == "" || line[0] != ' ' {
			stage = line
		}
		for i, f := range actbenchFigures {
			if found[i] || !strings.Contains(line, f.label) || !strings.Contains(stage, f.section) {
				continue
			}
			m := numberRe.FindStringSubmatch(line[strings.Index(line, f.label)+len(f.label):])
			if m == nil {
				continue
			}
			v, err := strconv.ParseFloat(strings.ReplaceAll(m[1], ",", ""), 64)
			if err != nil {
				continue
			}
			f.set(res, v)
			found[i] = true
		}
	}
	for i, f := range actbenchFigures {
		if !found[i] && !f.optional {
			if f.section != "" {
				return fmt.Errorf("actbench report has no %q line under %q", f.label, f.section)
			}
			return fmt.Errorf("actbench report has no %q line", f.label)
		}
	}
	return nil
}

var numberRe = regexp.MustCompile(`([0-9][0-9,]*(?:\.[0-9]+)?)`)

// printTable prints, per system, the median of its rounds with the range
// [min … max], then actledger's ratio to each peer: the ratio of the
// medians, and the range of the ratios within one round (measured minutes
// apart on the same machine); then what an operation cost each system.
func printTable(w io.Writer, pl plan, rounds [][]result) {
	fmt.Fprintf(w, "\nPeers: %d clients, closed loop %s (at most %d ahead), open loop %.0f/s offered for %s; %d round(s), medians [min … max]\n\n",
		pl.Clients, pl.Closed, pl.Backlog, pl.Rate, pl.Open, len(rounds))
	if pl.RunActledger {
		fmt.Fprintf(w, "actledger: go run ./cmd/actbench %s (its own durations; its latency is seen by polling the ledger every 2ms)\n\n", strings.Join(pl.ActbenchArgs, " "))
	}
	if len(rounds) == 0 {
		return
	}
	systems := make([]summary, len(rounds[0]))
	for i := range systems {
		systems[i] = summarize(rounds, i)
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "system\tops/s\t\tp50 ms\tp99 ms\t\tabandoned\tduplicates\topen\tfailed rounds\t")
	act := -1
	for i, s := range systems {
		if s.Name == "actledger" {
			act = i
		}
		if s.OK == 0 {
			fmt.Fprintf(tw, "%s\tfailed: %v\t\t\t\t\t\t\t\t\t\n", s.Name, s.Err)
			continue
		}
		fmt.Fprintf(tw, "%s\t%.0f\t%s\t%.1f\t%.1f\t%s\t%d\t%d\t%d\t%d\t\n", s.Name,
			median(s.Ops), spread(s.Ops, "%.0f"), median(s.P50), median(s.P99), spread(s.P99, "%.1f"),
			s.Abandoned, s.Duplicates, s.Open, len(rounds)-s.OK)
	}
	_ = tw.Flush()
	with := slices.IndexFunc(systems, func(s summary) bool { return s.Name == statementSystem(pl) })
	if act >= 0 && systems[act].OK > 0 {
		printRatios(w, rounds, systems, act, with)
	}
	if act >= 0 && with >= 0 && systems[act].OK > 0 && systems[with].OK > 0 {
		printStatementRatios(w, pl, rounds, systems, act, with)
	}
	printCost(w, systems)
}

// statementSystem names actledger's stage with the statement schedule.
func statementSystem(pl plan) string { return "actledger+statement/" + pl.StatementEvery.String() }

// printStatementRatios prints actledger with the statement schedule ÷
// actledger without: the ratio of the medians and [min … max] of the
// ratios within one round, for the sustained rate and the latencies.
func printStatementRatios(w io.Writer, pl plan, rounds [][]result, systems []summary, act, with int) {
	fmt.Fprintln(w)
	fmt.Fprintf(w, "actledger with a statement run every %s beside the load ÷ without: ratio of the medians, and [min … max] of the\n", pl.StatementEvery)
	fmt.Fprintln(w, "ratios within one round (ops/s: below 1 is the statement slowing the hot path; p50, p99: above 1 is)")
	var ops, p50, p99 []float64
	for _, round := range rounds {
		a, s := round[act], round[with]
		if a.Err == nil && s.Err == nil && a.OpsPerSec > 0 && a.P50 > 0 && a.P99 > 0 {
			ops = append(ops, s.OpsPerSec/a.OpsPerSec)
			p50 = append(p50, ms(s.P50)/ms(a.P50))
			p99 = append(p99, ms(s.P99)/ms(a.P99))
		}
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "\tops/s\t\tp50\t\tp99\t\t")
	fmt.Fprintf(tw, "with ÷ without\t%.2f×\t%s\t%.2f×\t%s\t%.2f×\t%s\t\n",
		median(systems[with].Ops)/median(systems[act].Ops), spread(ops, "%.2f×"),
		median(systems[with].P50)/median(systems[act].P50), spread(p50, "%.2f×"),
		median(systems[with].P99)/median(systems[act].P99), spread(p99, "%.2f×"))
	_ = tw.Flush()
}

// printRatios prints actledger's (system act's) ratio to each peer (not
// to system skip, actledger with the statement schedule).
func printRatios(w io.Writer, rounds [][]result, systems []summary, act, skip int) {
	fmt.Fprintln(w)
	fmt.Fprintln(w, "actledger ÷ peer: ratio of the medians, and [min … max] of the ratios within one round")
	fmt.Fprintln(w, "(ops/s: above 1 is actledger ahead; p99: below 1 is actledger ahead)")
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "peer\tops/s\t\tp99\t\t")
	for i, s := range systems {
		if i == act || i == skip || s.OK == 0 {
			continue
		}
		var ops, p99 []float64
		for _, round := range rounds {
			a, p := round[act], round[i]
			if a.Err == nil && p.Err == nil && p.OpsPerSec > 0 && p.P99 > 0 {
				ops = append(ops, a.OpsPerSec/p.OpsPerSec)
				p99 = append(p99, ms(a.P99)/ms(p.P99))
			}
		}
		fmt.Fprintf(tw, "%s\t%.2f×\t%s\t%.2f×\t%s\t\n", s.Name,
			median(systems[act].Ops)/median(s.Ops), spread(ops, "%.2f×"),
			median(systems[act].P99)/median(s.P99), spread(p99, "%.2f×"))
	}
	_ = tw.Flush()
}

// printCost prints where each system's CPU went per operation completed in
// the closed loop, and the WAL it wrote: on shared cores the total bounds
// the rate, and its parts say which process to look at.
func printCost(w io.Writer, systems []summary) {
	fmt.Fprintln(w)
	fmt.Fprintln(w, "Closed loop, per completed operation: CPU ms of Postgres (the system's database and the server's own")
	fmt.Fprintln(w, "processes), of the benchmark's process (the system, the mock supplier and the load) and of nats-server;")
	fmt.Fprintln(w, "WAL bytes written (server-wide); medians [min … max]")
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "system\tPostgres\tprocess\tnats-server\ttotal\t\tWAL bytes\t")
	for _, s := range systems {
		switch {
		case s.OK == 0:
			fmt.Fprintf(tw, "%s\tfailed\t\t\t\t\t\t\n", s.Name)
			continue
		case len(s.TotalMS) == 0:
			fmt.Fprintf(tw, "%s\t–\t–\t–\t–\t\t–\t\n", s.Name)
			continue
		}
		fmt.Fprintf(tw, "%s\t%.3f\t%.3f\t%.3f\t%.3f\t%s\t%.0f\t\n", s.Name,
			median(s.PostgresMS), median(s.ProcessMS), median(s.NATSMS), median(s.TotalMS), spread(s.TotalMS, "%.3f"), median(s.WALBytes))
	}
	_ = tw.Flush()
}

// summary is one system's figures over the rounds it completed.
type summary struct {
	Name                        string
	OK                          int
	Err                         error // the last failure
	Ops, P50, P99               []float64
	Abandoned, Duplicates, Open int // summed over the rounds
	// The closed loop's cost per operation, one value per round that
	// completed operations in its window.
	PostgresMS, ProcessMS, NATSMS, TotalMS, WALBytes []float64
}

// summarize collects system i's results from every round.
func summarize(rounds [][]result, i int) summary {
	s := summary{Name: rounds[0][i].Name}
	for _, round := range rounds {
		r := round[i]
		if r.Err != nil {
			s.Err = r.Err
			continue
		}
		s.OK++
		s.Ops = append(s.Ops, r.OpsPerSec)
		s.P50 = append(s.P50, ms(r.P50))
		s.P99 = append(s.P99, ms(r.P99))
		s.Abandoned += r.Abandoned
		s.Duplicates += r.Duplicates
		s.Open += r.Open
		if r.Cost == (cost{}) {
			continue // no operation completed in the window: nothing to divide
		}
		s.PostgresMS = append(s.PostgresMS, r.Cost.PostgresMS)
		s.ProcessMS = append(s.ProcessMS, r.Cost.ProcessMS)
		s.NATSMS = append(s.NATSMS, r.Cost.NATSMS)
		s.TotalMS = append(s.TotalMS, r.Cost.total())
		s.WALBytes = append(s.WALBytes, r.Cost.WALBytes)
	}
	return s
}

// median is the middle value of vs (the mean of the two middle ones for
// an even count); 0 for none.
func median(vs []float64) float64 {
	if len(vs) == 0 {
		return 0
	}
	s := slices.Sorted(slices.Values(vs))
	if n := len(s); n%2 == 0 {
		return (s[n/2-1] + s[n/2]) / 2
	}
	return s[len(s)/2]
}

// spread is "[min … max]" of vs in format f; empty for fewer than two.
func spread(vs []float64, f string) string {
	if len(vs) < 2 {
		return ""
	}
	return "[" + fmt.Sprintf(f, slices.Min(vs)) + " … " + fmt.Sprintf(f, slices.Max(vs)) + "]"
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// Stages of actbench's report whose rows parseActbench reads by section:
// the end-to-end open loop (other stages have p50 and p99 rows too) and
// the cost of the end-to-end maximum (the API's and the open loop's cost
// rows carry the same labels). actbench's CPU seconds per 1,000
// operations are CPU milliseconds per operation.
const (
	endToEndSection = "end to end, "
	maximumCost     = "cost: end to end, maximum"
)

// actbenchFigures are the report lines parseActbench reads, each within
// the stage whose first row contains section (anywhere when empty);
// optional ones are printed only when non-zero.
var actbenchFigures = []struct {
	label    string
	section  string
	optional bool
	set      func(*result, float64)
}{
	{label: "completed ops/s, sustained", set: func(r *result, v float64) { r.OpsPerSec = v }},
	{label: "p50 ms", section: endToEndSection, set: func(r *result, v float64) { r.P50 = fromMS(v) }},
	{label: "p99 ms", section: endToEndSection, set: func(r *result, v float64) { r.P99 = fromMS(v) }},
	{label: "ops abandoned (overloaded)", section: endToEndSection, optional: true, set: func(r *result, v float64) { r.Abandoned = int(v) }},
	{label: "operations ≠ 1 order", set: func(r *result, v float64) { r.Duplicates = int(v) }},
	{label: "operations left open", set: func(r *result, v float64) { r.Open = int(v) }},
	{label: "CPU s/1,000 ops, Postgres", section: maximumCost, set: func(r *result, v float64) { r.Cost.PostgresMS = v }},
	{label: "CPU s/1,000 ops, this process", section: maximumCost, set: func(r *result, v float64) { r.Cost.ProcessMS = v }},
	{label: "CPU s/1,000 ops, nats-server", section: maximumCost, set: func(r *result, v float64) { r.Cost.NATSMS = v }},
	{label: "WAL bytes/op", section: maximumCost, set: func(r *result, v float64) { r.Cost.WALBytes = v }},
}

func fromMS(v float64) time.Duration { return time.Duration(v * float64(time.Millisecond)) }
