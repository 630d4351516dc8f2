// Command actbench measures actledger against the limits of the machine it
// runs on, in one run: it first measures what Postgres and JetStream
// themselves allow (a two-INSERT transaction, an asynchronous publish with
// Nats-Msg-Id), then runs the real pipeline in-process (the HTTP API, the
// ledger, the outbox relay, the dispatcher and the mock supplier) on the
// same servers and prints one table: every figure as the median of the
// repetitions with min and max, its ratio to the limit it depends on, and
// its target with PASS or MISS (docs/benchmarks.md, "Reading the table").
//
// Each stage gets a fresh database migrated with schema.Migrate and streams
// under a unique prefix, removed when it ends, so nothing is left behind on
// the servers, but for the large stage's ledger: ten million operations
// (one million with --quick) written once into a database kept between
// runs (actbench_large_10m), on which the API and end-to-end stages run
// beside the same stages on an empty ledger, and every query that must
// stay bounded is timed. The rows its pipelines add are deleted after
// each. Progress goes to stderr, the table to stdout.
//
// Usage:
//
//	actbench [--quick] [--reps N] [--stages limits,api,relay,latency,e2e,notify,statement,large] [--refill] [--large-operations N] [--reconcile-every D] [--cpuprofile FILE]
//
// BENCH_DATABASE_URL (default postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable,
// a maintenance database: the benchmark creates and drops its own) and
// BENCH_NATS_URL (default nats://127.0.0.1:4222) say where the servers are.
// docs/benchmarks.md explains how to read the table.
package main

import (
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"runtime/pprof"
	"slices"
	"strings"
	"syscall"
	"time"
)

// Defaults of the servers, those of `make test` and the README.
const (
	defaultDatabaseURL = "postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable"
	defaultNATSURL     = "nats://127.0.0.1:4222"
)

// allStages are the stages in the order they run.
var allStages = []string{"limits", "api", "relay", "latency", "e2e", "notify", "statement", "large"}

// fullPlan is `make bench`: three repetitions, about four minutes on two
// cores.
var fullPlan = plan{
	Reps:             3,
	InsertClients:    16,
	InsertDuration:   4 * time.Second,
	PublishMessages:  100_000,
	APIClients:       []int{1, 8, 16},
	APIDuration:      5 * time.Second,
	DrainRows:        20_000,
	LatencyRates:     []float64{1000, 2500},
	LatencyDuration:  8 * time.Second,
	E2ERate:          1000,
	E2EDuration:      8 * time.Second,
	NotifyRate:       250,
	NotifyDuration:   6 * time.Second,
	MaxClients:       16,
	MaxDuration:      6 * time.Second,
	MaxBacklog:       500,
	OpenLoopClients:  128,
	GiveUp:           time.Second,
	Warmup:           800,
	Settle:           60 * time.Second,
	StatementRecords: []int{10_000, 100_000},
	LargeOperations:  10_000_000,
	LargeRange:       250_000,
	LargeWorkers:     2,
}

// quickPlan is a smoke test of the whole harness: one short repetition.
var quickPlan = plan{
	Reps:             1,
	InsertClients:    16,
	InsertDuration:   time.Second,
	PublishMessages:  20_000,
	APIClients:       []int{1, 8, 16},
	APIDuration:      time.Second,
	DrainRows:        5_000,
	LatencyRates:     []float64{1000, 2500},
	LatencyDuration:  2 * time.Second,
	E2ERate:          1000,
	E2EDuration:      2 * time.Second,
	NotifyRate:       250,
	NotifyDuration:   2 * time.Second,
	MaxClients:       16,
	MaxDuration:      2 * time.Second,
	MaxBacklog:       500,
	OpenLoopClients:  128,
	GiveUp:           time.Second,
	Warmup:           160,
	Settle:           60 * time.Second,
	StatementRecords: []int{1_000, 10_000},
	LargeOperations:  1_000_000,
	LargeRange:       250_000,
	LargeWorkers:     2,
}

var started = time.Now()

// logf prints a progress line to stderr with the time since the start.
func logf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "[%6.1fs] %s\n", time.Since(started).Seconds(), fmt.Sprintf(format, args...))
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:])
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "actbench:", err)
		os.Exit(1)
	}
}

// run parses the flags, runs the stages and prints the report.
func run(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("actbench", flag.ContinueOnError)
	quick := fs.Bool("quick", false, "one short repetition: a smoke test of the harness")
	reps := fs.Int("reps", 0, "repetitions of every stage (default 3, or 1 with --quick)")
	stagesFlag := fs.String("stages", strings.Join(allStages, ","), "comma-separated stages to run: "+strings.Join(allStages, ","))
	refill := fs.Bool("refill", false, "write the large stage's ledger again even if a kept one holds the same fill")
	largeOps := fs.Int64("large-operations", 0, "operations of the large stage's ledger (default 10,000,000, or 1,000,000 with --quick)")
	reconcileEvery := fs.Duration("reconcile-every", 0, "run the provider's statement on this schedule beside the end-to-end stage (e.g. 10s; 0: never)")
	cpuprofile := fs.String("cpuprofile", "", "write a CPU profile of the run to this file (for go tool pprof)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	pl := fullPlan
	if *quick {
		pl = quickPlan
	}
	if *reps > 0 {
		pl.Reps = *reps
	}
	if *largeOps > 0 {
		pl.LargeOperations = *largeOps
	}
	stages, err := parseStages(*stagesFlag)
	if err != nil {
		return err
	}
	if *cpuprofile != "" {
		f, err := os.Create(*cpuprofile)
		if err != nil {
			return err
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return err
		}
		defer pprof.StopCPUProfile()
	}
	e := &env{
		adminURL:       cmp.Or(os.Getenv("BENCH_DATABASE_URL"), defaultDatabaseURL),
		natsURL:        cmp.Or(os.Getenv("BENCH_NATS_URL"), defaultNATSURL),
		reconcileEvery: *reconcileEvery,
	}
	res, err := bench(ctx, e, pl, stages, *refill)
	if err != nil {
		return err
	}
	res.Elapsed = time.Since(started)
	writeReport(os.Stdout, res)
	return nil
}

// parseStages checks a comma-separated list of stages.
func parseStages(s string) ([]string, error) {
	var out []string
	for _, st := range strings.Split(s, ",") {
		st = strings.TrimSpace(st)
		if st == "" {
			continue
		}
		if !slices.Contains(allStages, st) {
			return nil, fmt.Errorf("unknown stage %q; stages are %s", st, strings.Join(allStages, ","))
		}
		out = append(out, st)
	}
	if len(out) == 0 {
		return nil, errors.New("--stages is empty")
	}
	return out, nil
}

// results is everything one run measured, per repetition.
type results struct {
	Facts   facts
	Plan    plan
	Insert  []insertResult
	Publish []float64 // messages per second
	API     [][]apiResult
	Drain   []drainResult
	Latency [][]latencyResult
	E2E     []e2eResult
	Notify  []notifyResult
	// Statement is, per repetition, one run per window of
	// plan.StatementRecords.
	Statement [][]statementResult
	Large     *largeResult
	// ReconcileEvery is --reconcile-every.
	ReconcileEvery time.Duration
	// TotalOrders is the supplier's order count over the whole run.
	TotalOrders int
	Elapsed     time.Duration
}

// bench runs the stages in order, each pl.Reps times.
func bench(ctx context.Context, e *env, pl plan, stages []string, refill bool) (*results, error) {
	res := &results{Plan: pl}
	var err error
	if res.Facts, err = machineFacts(ctx, e); err != nil {
		return nil, err
	}
	logf("%d cores, %s; Postgres %s; nats-server %s", res.Facts.Cores, res.Facts.GoVersion, res.Facts.Postgres, res.Facts.NATS)
	if e.reconcileEvery > 0 {
		e.supplier, err = serveSupplier(scheduledReconcile(e.reconcileEvery))
		res.ReconcileEvery = e.reconcileEvery
	} else {
		e.supplier, err = startSupplier()
	}
	if err != nil {
		return nil, err
	}
	defer e.supplier.close()

	for _, stage := range stages {
		switch stage {
		case "limits":
			err = benchLimits(ctx, e, pl, res)
		case "api":
			err = repeat(ctx, pl, "API enqueue over HTTP", func() error {
				r, err := apiEnqueue(ctx, e, pl)
				if err == nil {
					res.API = append(res.API, r)
				}
				return err
			})
		case "relay":
			err = repeat(ctx, pl, fmt.Sprintf("relay drain of %s outbox rows", thousands(float64(pl.DrainRows))), func() error {
				r, err := relayDrain(ctx, e, pl)
				if err == nil {
					res.Drain = append(res.Drain, r)
				}
				return err
			})
		case "latency":
			err = repeat(ctx, pl, "enqueue → published, open loop", func() error {
				r, err := publishLatency(ctx, e, pl)
				if err == nil {
					res.Latency = append(res.Latency, r)
				}
				return err
			})
		case "notify":
			err = benchNotify(ctx, e, pl, res)
		case "statement":
			err = benchStatement(ctx, e, pl, res)
		case "large":
			err = benchLarge(ctx, e, pl, refill, res)
		case "e2e":
			err = repeat(ctx, pl, "end to end with the mock supplier", func() error {
				r, err := endToEnd(ctx, e, pl)
				if err == nil {
					res.E2E = append(res.E2E, r)
				}
				return err
			})
		}
		if err != nil {
			return nil, fmt.Errorf("stage %s: %w", stage, err)
		}
	}
	res.TotalOrders = e.supplier.TotalOrders()
	return res, nil
}

// repeat runs one repetition of a stage pl.Reps times, saying so on stderr.
func repeat(ctx context.Context, pl plan, name string, once func() error) error {
	for rep := range pl.Reps {
		if err := ctx.Err(); err != nil {
			return err
		}
		logf("%s, repetition %d/%d", name, rep+1, pl.Reps)
		if err := once(); err != nil {
			return err
		}
	}
	return nil
}

// benchLimits measures the two limits, each pl.Reps times.
func benchLimits(ctx context.Context, e *env, pl plan, res *results) error {
	il, err := newInsertLimit(ctx, e.adminURL, pl.InsertClients)
	if err != nil {
		return err
	}
	defer il.close(ctx)
	if _, err := il.run(ctx, pl.InsertClients, pl.InsertDuration/4); err != nil {
		return fmt.Errorf("warm-up: %w", err)
	}
	err = repeat(ctx, pl, fmt.Sprintf("limit: two-INSERT transactions, %d clients", pl.InsertClients), func() error {
		r, err := il.run(ctx, pl.InsertClients, pl.InsertDuration)
		if err == nil {
			res.Insert = append(res.Insert, r)
			logf("  %s tx/s, p50 %.2f ms, p99 %.2f ms", thousands(r.Rate), ms(r.Lat.P50), ms(r.Lat.P99))
		}
		return err
	})
	if err != nil {
		return err
	}

	plim, err := newPublishLimit(ctx, e.natsURL)
	if err != nil {
		return err
	}
	defer plim.close(ctx)
	if _, err := plim.run(ctx, pl.PublishMessages/10); err != nil {
		return fmt.Errorf("warm-up: %w", err)
	}
	return repeat(ctx, pl, fmt.Sprintf("limit: JetStream async publish of %s messages", thousands(float64(pl.PublishMessages))), func() error {
		r, err := plim.run(ctx, pl.PublishMessages)
		if err == nil {
			res.Publish = append(res.Publish, r)
			logf("  %s msgs/s", thousands(r))
		}
		return err
	})
}
