package main

import (
	"context"
	"fmt"
	"slices"
	"sync/atomic"
	"time"

	"github.com/actledger/actledger/internal/resources"
	"github.com/actledger/actledger/ledger"
)

// plan sizes every stage; main has a full plan and a quick one, the test a
// tiny one.
type plan struct {
	Reps int
	// Limits.
	InsertClients   int           // the two-INSERT limit's concurrency: the API stage's largest
	InsertDuration  time.Duration // per repetition
	PublishMessages int           // per repetition of the JetStream limit
	// API enqueue: closed loop, one run per client count.
	APIClients  []int
	APIDuration time.Duration
	// Relay drain.
	DrainRows int
	// Enqueue → published: open loop, one run per rate.
	LatencyRates    []float64
	LatencyDuration time.Duration
	// End to end: open loop at E2ERate, then a closed loop of MaxClients
	// for MaxDuration to find the sustained maximum, held at most
	// MaxBacklog operations ahead of the supplier.
	E2ERate     float64
	E2EDuration time.Duration
	MaxClients  int
	MaxDuration time.Duration
	MaxBacklog  int
	// The notify stage: an open loop at NotifyRate for NotifyDuration,
	// on a pipeline without notification receivers, then on one with a
	// hanging and a healthy receiver.
	NotifyRate     float64
	NotifyDuration time.Duration
	// OpenLoopClients serve the open loops' due operations: enough that
	// none waits for a free client at the offered rates.
	OpenLoopClients int
	// GiveUp bounds how far an open loop lets the system fall behind the
	// offered rate before it abandons operations (see openLoop).
	GiveUp time.Duration
	// Warmup operations precede each pipeline's timed runs (connections,
	// prepared statements, consumers).
	Warmup int
	// Settle bounds every wait for work in flight to finish.
	Settle time.Duration
	// The large stage's ledger: LargeOperations operations, written
	// LargeRange per transaction, LargeWorkers ranges at a time.
	// StatementRecords are the windows of the statement stage, each
	// run once per repetition: as many records as operations.
	StatementRecords []int
	LargeOperations  int64
	LargeRange       int64
	LargeWorkers     int
	// LargeDatabase names the kept database (default actbench_large_10m
	// for ten million, and so on).
	LargeDatabase string
}

// apiResult is one closed-loop run of the API at one client count.
type apiResult struct {
	Clients int
	Ops     int
	Rate    float64
	Lat     summary
	CPU     resources.Use
	WAL     int64 // bytes the server wrote to its WAL during the run
}

// apiEnqueue measures POST /v1/operations alone (no relay, no
// dispatcher): for each client count a closed loop of fresh approved
// operations.
func apiEnqueue(ctx context.Context, e *env, pl plan) ([]apiResult, error) {
	p, err := newPipeline(ctx, e, roles{API: true})
	if err != nil {
		return nil, err
	}
	defer p.close(ctx)
	clients, err := p.clients(ctx, slices.Max(pl.APIClients))
	if err != nil {
		return nil, err
	}
	if _, err := closedLoop(ctx, clients, loop{PerClient: max(pl.Warmup/len(clients), 1)}); err != nil {
		return nil, fmt.Errorf("warm-up: %w", err)
	}
	var out []apiResult
	for _, n := range pl.APIClients {
		wal, err := resources.MarkWAL(ctx, p.db.pool)
		if err != nil {
			return nil, err
		}
		cpu := resources.Start(databasePrefix)
		res, err := closedLoop(ctx, clients[:n], loop{Duration: pl.APIDuration})
		if err != nil {
			return nil, err
		}
		r := apiResult{Clients: n, Ops: res.Ops, Rate: perSecond(res.Ops, res.Elapsed), Lat: res.Latencies.summary(), CPU: cpu.Stop()}
		if r.WAL, err = wal.Bytes(ctx); err != nil {
			return nil, err
		}
		out = append(out, r)
		logf("  %2d clients: %s ops/s, p50 %.2f ms, p99 %.2f ms", n, thousands(r.Rate), ms(r.Lat.P50), ms(r.Lat.P99))
	}
	return out, nil
}

// outboxBacklogInsert writes n dispatch-like outbox rows (as Enqueue
// writes them) in one statement.
const outboxBacklogInsert = `INSERT INTO outbox (subject, msg_id, payload)
SELECT $1, 'dispatch.' || u || '.1', convert_to(json_build_object('operation_id', u, 'version', 1)::text, 'UTF8')
FROM (SELECT gen_random_uuid() AS u FROM generate_series(1, $2::int)) g`

const outboxAnalyze = `ANALYZE outbox`

const outboxUnpublished = `SELECT count(*) FROM outbox WHERE published_at IS NULL`

// drainResult is one relay drain.
type drainResult struct {
	Rows int
	Rate float64 // rows published per second
	CPU  resources.Use
}

// relayDrain writes a backlog of DrainRows outbox rows with no relay
// running, then starts one relay (configured as `actledger serve` does)
// and times it until every row is published and deleted. The backlog is
// analysed first, as autovacuum would have done while it built up: without
// statistics the planner sorts the whole backlog for each of the first
// claims, which measures the server's configuration, not the relay.
func relayDrain(ctx context.Context, e *env, pl plan) (drainResult, error) {
	p, err := newPipeline(ctx, e, roles{Relay: true, Later: true})
	if err != nil {
		return drainResult{}, err
	}
	defer p.close(ctx)
	// A subject of the ops stream that no dispatcher consumes.
	if _, err := p.db.pool.Exec(ctx, outboxBacklogInsert, p.broker.DispatchSubject("drain"), pl.DrainRows); err != nil {
		return drainResult{}, fmt.Errorf("write the outbox backlog: %w", err)
	}
	if _, err := p.db.pool.Exec(ctx, outboxAnalyze); err != nil {
		return drainResult{}, fmt.Errorf("analyse the outbox backlog: %w", err)
	}
	cpu := resources.Start(databasePrefix)
	start := time.Now()
	if err := p.start(ctx); err != nil {
		return drainResult{}, err
	}
	deadline := start.Add(pl.Settle)
	for p.relay.Stats().Published < uint64(pl.DrainRows) {
		if time.Now().After(deadline) {
			return drainResult{}, fmt.Errorf("relay published %d of %d rows in %s", p.relay.Stats().Published, pl.DrainRows, pl.Settle)
		}
		if err := sleep(ctx, 500*time.Microsecond); err != nil {
			return drainResult{}, err
		}
	}
	elapsed := time.Since(start)
	use := cpu.Stop()
	var left int
	if err := p.db.pool.QueryRow(ctx, outboxUnpublished).Scan(&left); err != nil {
		return drainResult{}, fmt.Errorf("count unpublished rows: %w", err)
	}
	stream, err := p.broker.JetStream().Stream(ctx, p.broker.OpsStream())
	if err != nil {
		return drainResult{}, err
	}
	info, err := stream.Info(ctx)
	if err != nil {
		return drainResult{}, err
	}
	if left != 0 || info.State.Msgs != uint64(pl.DrainRows) {
		return drainResult{}, fmt.Errorf("relay drain: %d rows left unpublished, %d messages on the stream, want 0 and %d", left, info.State.Msgs, pl.DrainRows)
	}
	r := drainResult{Rows: pl.DrainRows, Rate: perSecond(pl.DrainRows, elapsed), CPU: use}
	logf("  %s rows in %s: %s rows/s", thousands(float64(r.Rows)), elapsed.Round(time.Millisecond), thousands(r.Rate))
	return r, nil
}

// latencyResult is one open-loop run at one offered rate.
type latencyResult struct {
	Offered   float64
	Ops       int // sent; the latencies are theirs
	Abandoned int // not sent: the system was too far behind (see openLoop)
	Lat       summary
}

// abandonedNote says on a progress line that an open loop fell behind.
func abandonedNote(n int) string {
	if n == 0 {
		return ""
	}
	return fmt.Sprintf(" (overloaded: %d operations abandoned)", n)
}

// publishLatency measures enqueue → published with the API and the relay
// running: at each offered rate, from an operation's due time to the moment
// a subscriber of the ops stream sees its dispatch message.
func publishLatency(ctx context.Context, e *env, pl plan) ([]latencyResult, error) {
	p, err := newPipeline(ctx, e, roles{API: true, Relay: true})
	if err != nil {
		return nil, err
	}
	defer p.close(ctx)
	clients, err := p.clients(ctx, pl.OpenLoopClients)
	if err != nil {
		return nil, err
	}
	// Every client warms up, so the HTTP connections and the whole pool are
	// open (and the pool's statements prepared) before the timed runs.
	warm, err := closedLoop(ctx, clients, loop{PerClient: max(pl.Warmup/len(clients), 1)})
	if err != nil {
		return nil, fmt.Errorf("warm-up: %w", err)
	}
	if err := waitPublished(ctx, p, warm.Ops, pl.Settle); err != nil {
		return nil, err
	}
	var out []latencyResult
	for _, rate := range pl.LatencyRates {
		t := newTracker()
		stop, err := p.watchStream(ctx, t)
		if err != nil {
			return nil, err
		}
		ol, err := openLoop(ctx, clients, rate, pl.LatencyDuration, pl.GiveUp, t.sent, t.inFlight)
		var lat latencies
		if err == nil {
			lat, err = t.wait(ctx, ol.Sent, pl.Settle)
		}
		stop()
		if err != nil {
			return nil, fmt.Errorf("%s ops/s offered: %w", thousands(rate), err)
		}
		r := latencyResult{Offered: rate, Ops: ol.Sent, Abandoned: ol.Abandoned, Lat: lat.summary()}
		out = append(out, r)
		logf("  %s ops/s offered: p50 %.2f ms, p99 %.2f ms, max %.2f ms%s", thousands(rate), ms(r.Lat.P50), ms(r.Lat.P99), ms(r.Lat.Max), abandonedNote(r.Abandoned))
	}
	return out, nil
}

// waitPublished waits until the pipeline's relay has published n rows.
func waitPublished(ctx context.Context, p *pipeline, n int, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for p.relay.Stats().Published < uint64(n) {
		if time.Now().After(deadline) {
			return fmt.Errorf("relay published %d of %d rows in %s", p.relay.Stats().Published, n, timeout)
		}
		if err := sleep(ctx, 5*time.Millisecond); err != nil {
			return err
		}
	}
	return nil
}

// e2eResult is one end-to-end repetition: an open loop at a fixed rate,
// then a closed loop at the maximum.
type e2eResult struct {
	Offered   float64
	Ops       int     // sent; the latencies are theirs
	Abandoned int     // not sent: the system was too far behind (see openLoop)
	Rate      float64 // completed per second, from the first due time to the last success
	Lat       summary
	CPU       resources.Use

	MaxClients int
	MaxOps     int           // completed within the closed loop's window
	MaxRate    float64       // completed per second within the window
	MaxCPU     resources.Use // over the window
	MaxWAL     int64         // bytes the server wrote to its WAL over the window
	MaxFPI     int64         // full-page images among them

	Orders orderCheck
	// Statements is what the statement schedule did beside the stage
	// (--reconcile-every); nil when it did not run.
	Statements *scheduledRuns
}

// endToEnd runs the whole pipeline against the mock supplier: enqueue →
// relay → JetStream → dispatcher → provider call → succeeded recorded.
func endToEnd(ctx context.Context, e *env, pl plan) (e2eResult, error) {
	var r e2eResult
	// The schedule runs beside the stage on a fresh ledger only: the
	// large ledger's clean-up knows nothing of statement runs.
	statements := e.reconcileEvery > 0 && e.large == nil
	p, err := newPipeline(ctx, e, roles{API: true, Relay: true, Dispatcher: true, Statements: statements})
	if err != nil {
		return r, err
	}
	defer p.close(ctx)
	clients, err := p.clients(ctx, max(pl.OpenLoopClients, pl.MaxClients))
	if err != nil {
		return r, err
	}
	if _, err := closedLoop(ctx, clients, loop{PerClient: max(pl.Warmup/len(clients), 1)}); err != nil {
		return r, fmt.Errorf("warm-up: %w", err)
	}
	if _, err := p.waitSettled(ctx, pl.Settle); err != nil {
		return r, fmt.Errorf("warm-up: %w", err)
	}

	// At a fixed offered rate: latency from due time to succeeded.
	t := newTracker()
	stop, err := p.watchLedger(ctx, t)
	if err != nil {
		return r, err
	}
	cpu := resources.Start(databasePrefix)
	ol, err := openLoop(ctx, clients[:pl.OpenLoopClients], pl.E2ERate, pl.E2EDuration, pl.GiveUp, t.sent, t.inFlight)
	var lat latencies
	if err == nil {
		lat, err = t.wait(ctx, ol.Sent, pl.Settle)
	}
	stop()
	if err != nil {
		return r, fmt.Errorf("%s ops/s offered: %w", thousands(pl.E2ERate), err)
	}
	r.CPU = cpu.Stop()
	r.Offered, r.Ops, r.Abandoned, r.Lat = pl.E2ERate, ol.Sent, ol.Abandoned, lat.summary()
	r.Rate = perSecond(ol.Sent, r.CPU.Wall)
	logf("  %s ops/s offered: %s completed/s, p50 %.2f ms, p99 %.2f ms%s",
		thousands(r.Offered), thousands(r.Rate), ms(r.Lat.P50), ms(r.Lat.P99), abandonedNote(r.Abandoned))

	if err := p.maximum(ctx, e, pl, clients[:pl.MaxClients], &r); err != nil {
		return r, fmt.Errorf("maximum: %w", err)
	}
	if err := p.logStages(ctx); err != nil {
		return r, err
	}
	if r.Orders, err = checkOrders(ctx, p, e.supplier); err != nil {
		return r, err
	}
	if statements {
		s, err := readScheduledRuns(ctx, p)
		if err != nil {
			return r, err
		}
		r.Statements = &s
		logf("  statement every %s beside the stage: %d runs (%d complete), %d pages, %s", e.reconcileEvery, s.Runs, s.Complete, s.Pages, findingsText(s.Findings))
	}
	return r, nil
}

// stageLatencies reads, from the ledger's own timestamps, how long every
// operation of the run spent in each stage of the pipeline: from its
// enqueue's transaction to its claim's batch (the relay's publish and the
// dispatcher's delivery; the relay deletes a published row, so its time is
// row 4's), to its result's batch. Each timestamp is the start of a shared
// batch's transaction, so a stage includes the waits for batches in
// flight. p50 and p99 in milliseconds, for the log: they tell which stage a
// change should shorten.
const stageLatencies = `
WITH o AS (
    SELECT op.created_at AS enqueued,
        (SELECT e.at FROM operation_events e WHERE e.operation_id = op.id AND e.kind = 'claimed' ORDER BY e.seq LIMIT 1) AS claimed,
        (SELECT e.at FROM operation_events e WHERE e.operation_id = op.id AND e.kind = 'attempt' ORDER BY e.seq LIMIT 1) AS answered
    FROM operations op
    WHERE op.tenant_id = $1
)
SELECT percentile_cont(ARRAY[0.5, 0.99]) WITHIN GROUP (ORDER BY extract(epoch FROM claimed - enqueued) * 1000),
    percentile_cont(ARRAY[0.5, 0.99]) WITHIN GROUP (ORDER BY extract(epoch FROM answered - claimed) * 1000)
FROM o`

// logStages logs the stage latencies of every operation of the pipeline
// (warm-up, open loop and maximum together).
func (p *pipeline) logStages(ctx context.Context) error {
	var claim, answer []float64
	if err := p.db.pool.QueryRow(ctx, stageLatencies, p.tenantID).Scan(&claim, &answer); err != nil {
		return fmt.Errorf("stage latencies: %w", err)
	}
	if len(claim) < 2 || len(answer) < 2 {
		return nil // no operations
	}
	logf("  stages, p50/p99 ms from the ledger's timestamps: enqueue → claim %.1f/%.1f, claim → result batch %.1f/%.1f",
		claim[0], claim[1], answer[0], answer[1])
	return nil
}

// maximum finds the sustained end-to-end rate: a closed loop of clients,
// each holding back while the pipeline is more than MaxBacklog operations
// ahead of the supplier's orders, so the pipeline stays saturated without a
// backlog that would take long to drain. The rate is the operations that
// succeeded within the window, per second.
func (p *pipeline) maximum(ctx context.Context, e *env, pl plan, clients []*client, r *e2eResult) error {
	base := e.supplier.TotalOrders()
	var started atomic.Int64
	hold := func(ctx context.Context) error {
		for started.Load()-int64(e.supplier.TotalOrders()-base) >= int64(pl.MaxBacklog) {
			if err := sleep(ctx, time.Millisecond); err != nil {
				return err
			}
		}
		started.Add(1)
		return nil
	}
	wal, err := resources.MarkWAL(ctx, p.db.pool)
	if err != nil {
		return err
	}
	cpu := resources.Start(databasePrefix)
	res, err := closedLoop(ctx, clients, loop{Duration: pl.MaxDuration, Hold: hold})
	if err != nil {
		return err
	}
	var open int
	if err := p.db.pool.QueryRow(ctx, operationsOpen, p.tenantID).Scan(&open); err != nil {
		return fmt.Errorf("count open operations: %w", err)
	}
	r.MaxCPU = cpu.Stop()
	if r.MaxWAL, err = wal.Bytes(ctx); err != nil {
		return err
	}
	if r.MaxFPI, err = wal.FullPageImages(ctx); err != nil {
		return err
	}
	r.MaxClients, r.MaxOps = len(clients), res.Ops-open
	r.MaxRate = perSecond(r.MaxOps, r.MaxCPU.Wall)
	logf("  maximum, %d clients at most %d operations ahead: %s completed/s", len(clients), pl.MaxBacklog, thousands(r.MaxRate))
	_, err = p.waitSettled(ctx, pl.Settle)
	return err
}

// orderCheck is what the supplier holds for the operations of a pipeline.
type orderCheck struct {
	Operations int // operations in the ledger
	ExactlyOne int // whose external key has exactly one order at the supplier
	Succeeded  int // operations in state succeeded
	Open       int // operations not in a final state
}

const operationsAll = `SELECT external_key, status FROM operations WHERE tenant_id = $1`

// checkOrders compares every operation of p's tenant with the supplier's
// real orders.
func checkOrders(ctx context.Context, p *pipeline, s *supplier) (orderCheck, error) {
	var c orderCheck
	rows, _ := p.db.pool.Query(ctx, operationsAll, p.tenantID)
	var key string
	var status ledger.Status
	for rows.Next() {
		if err := rows.Scan(&key, &status); err != nil {
			rows.Close()
			return c, fmt.Errorf("read operations: %w", err)
		}
		c.Operations++
		if s.Orders(key) == 1 {
			c.ExactlyOne++
		}
		if status == ledger.StatusSucceeded {
			c.Succeeded++
		}
		if !status.Terminal() {
			c.Open++
		}
	}
	if err := rows.Err(); err != nil {
		return c, fmt.Errorf("read operations: %w", err)
	}
	return c, nil
}
