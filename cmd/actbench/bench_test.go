package main

import (
	"bytes"
	"maps"
	"strings"
	"testing"
	"time"

	"github.com/actledger/actledger/internal/testdb"
	"github.com/actledger/actledger/internal/testnats"
	"github.com/actledger/actledger/ledger"
)

// tinyPlan runs every stage at a size that proves the harness, not the
// pipeline: about 200 operations each, and an open loop that never gives
// up on an operation.
var tinyPlan = plan{
	Reps:            1,
	InsertClients:   4,
	InsertDuration:  200 * time.Millisecond,
	PublishMessages: 200,
	APIClients:      []int{1, 4},
	APIDuration:     200 * time.Millisecond,
	DrainRows:       200,
	LatencyRates:    []float64{200},
	LatencyDuration: time.Second,
	E2ERate:         200,
	E2EDuration:     time.Second,
	NotifyRate:      100,
	NotifyDuration:  time.Second,
	MaxClients:      4,
	// Long enough for an operation to complete within the window beside
	// the rest of make test, where one took 0.6-1.4 s: in 200 ms none
	// had, once, and the stage measured nothing.
	MaxDuration:     time.Second,
	MaxBacklog:      50,
	OpenLoopClients: 16,
	GiveUp:          time.Minute,
	Warmup:          16,
	Settle:          20 * time.Second,
}

// TestStages runs each stage once at tiny sizes against the real Postgres
// and NATS of `make test`, and checks that the counts add up: every
// operation sent is measured, every end-to-end operation succeeded with
// exactly one order at the supplier. It asserts no timing.
func TestStages(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	e := &env{adminURL: testdb.AdminURL(), natsURL: testnats.URL()}
	var err error
	if e.supplier, err = startSupplier(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.supplier.close)
	pl := tinyPlan
	res := &results{Plan: pl}
	if res.Facts, err = machineFacts(ctx, e); err != nil {
		t.Fatal(err)
	}

	if err := benchLimits(ctx, e, pl, res); err != nil {
		t.Fatalf("limits: %v", err)
	}
	if len(res.Insert) != 1 || res.Insert[0].Tx == 0 || len(res.Publish) != 1 || res.Publish[0] <= 0 {
		t.Errorf("limits: got %+v and %v, want one measured repetition of each", res.Insert, res.Publish)
	}

	api, err := apiEnqueue(ctx, e, pl)
	if err != nil {
		t.Fatalf("API enqueue: %v", err)
	}
	res.API = append(res.API, api)
	for i, r := range api {
		if r.Clients != pl.APIClients[i] || r.Ops == 0 || r.Lat.N != r.Ops {
			t.Errorf("API enqueue with %d clients: %d operations, %d latencies", pl.APIClients[i], r.Ops, r.Lat.N)
		}
	}

	drain, err := relayDrain(ctx, e, pl)
	if err != nil {
		t.Fatalf("relay drain: %v", err)
	}
	res.Drain = append(res.Drain, drain)

	lat, err := publishLatency(ctx, e, pl)
	if err != nil {
		t.Fatalf("enqueue → published: %v", err)
	}
	res.Latency = append(res.Latency, lat)
	if got, want := lat[0].Ops, 200; got != want || lat[0].Abandoned != 0 || lat[0].Lat.N != want {
		t.Errorf("enqueue → published: %d sent, %d abandoned, %d latencies; want %d, 0, %d", got, lat[0].Abandoned, lat[0].Lat.N, want, want)
	}

	e2e, err := endToEnd(ctx, e, pl)
	if err != nil {
		t.Fatalf("end to end: %v", err)
	}
	res.E2E = append(res.E2E, e2e)
	if e2e.Ops != 200 || e2e.Lat.N != 200 || e2e.MaxOps == 0 {
		t.Errorf("end to end: %d operations at the fixed rate (%d latencies), %d at the maximum; want 200, 200, > 0", e2e.Ops, e2e.Lat.N, e2e.MaxOps)
	}
	o := e2e.Orders
	if o.Operations < pl.Warmup+e2e.Ops+e2e.MaxOps || o.ExactlyOne != o.Operations || o.Succeeded != o.Operations || o.Open != 0 {
		t.Errorf("end to end ledger: %+v, want at least %d operations, all succeeded with exactly one order", o, pl.Warmup+e2e.Ops+e2e.MaxOps)
	}
	res.TotalOrders = e.supplier.TotalOrders()
	if res.TotalOrders != o.Operations {
		t.Errorf("the supplier holds %d orders for %d operations", res.TotalOrders, o.Operations)
	}

	var out bytes.Buffer
	writeReport(&out, res)
	// bench/peers reads the end-to-end rows and the maximum's cost rows
	// (its parseActbench).
	for _, want := range []string{"1a", "1b", "API enqueue, 4 client(s)", "relay drain", "enqueue → published", "end to end, maximum", "operations ≠ 1 order",
		"cost: end to end, maximum", "CPU s/1,000 ops, Postgres", "CPU s/1,000 ops, this process", "CPU s/1,000 ops, nats-server", "WAL bytes/op"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("the report has no %q:\n%s", want, out.String())
		}
	}
}

// TestStatementStage runs the statement stage once over a small window
// and checks that the run read every page and found what the window
// holds: every kind of finding, each as many times as it was placed, and
// the report has row 8. It asserts no timing.
func TestStatementStage(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	e := &env{adminURL: testdb.AdminURL(), natsURL: testnats.URL()}
	pl := tinyPlan
	pl.StatementRecords = []int{1_000, 12_000}
	res := &results{Plan: pl}
	if err := benchStatement(ctx, e, pl, res); err != nil {
		t.Fatal(err)
	}
	for j, r := range res.Statement[0] {
		n := pl.StatementRecords[j]
		if r.Status != ledger.RunComplete || r.Pages != n/100 || r.Operations != int64(n) || !maps.Equal(nonZero(r.Findings), stmtExpected(n)) {
			t.Errorf("window of %d: run %s (%s), %d pages, %d operations, %s; want complete, %d pages, %d operations, %s",
				n, r.Status, r.Error, r.Pages, r.Operations, findingsText(r.Findings), n/100, n, findingsText(stmtExpected(n)))
		}
		if r.Mem.RSSPeak < r.Mem.RSSBefore || r.Mem.HeapPeak == 0 {
			t.Errorf("window of %d: memory %+v", n, r.Mem)
		}
	}
	if got := stmtExpected(12_000); got[ledger.FindingDuplicate] != 2 || got[ledger.FindingMissing] != 6 || got[ledger.FindingForeign] != 2 {
		t.Errorf("12,000 records hold %s: want two of each kind that is no match, six missing", findingsText(got))
	}
	var out bytes.Buffer
	writeReport(&out, res)
	for _, want := range []string{"statement run, 12,000 records", "peak RSS MiB, process", "Go heap peak MiB", "runs not as the window holds"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("the report has no %q:\n%s", want, out.String())
		}
	}
}

// TestEndToEndWithStatementSchedule runs the end-to-end stage with a
// statement every second beside it (--reconcile-every): the schedule
// ran in the stage's pipeline, its runs completed with nothing for a
// person, the stage's own counts still add up, and row 5 reports the
// runs. (At these sizes a run may read no record yet; bench-peers' runs
// read thousands, docs/benchmarks.md.)
func TestEndToEndWithStatementSchedule(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	e := &env{adminURL: testdb.AdminURL(), natsURL: testnats.URL(), reconcileEvery: time.Second}
	var err error
	if e.supplier, err = serveSupplier(scheduledReconcile(e.reconcileEvery)); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.supplier.close)
	r, err := endToEnd(ctx, e, tinyPlan)
	if err != nil {
		t.Fatal(err)
	}
	s := r.Statements
	if s == nil || s.Runs == 0 || s.Complete != s.Runs || s.attention() != 0 {
		t.Fatalf("statement runs beside the stage: %+v, want at least one, all complete, nothing for a person", s)
	}
	if o := r.Orders; o.ExactlyOne != o.Operations || o.Succeeded != o.Operations {
		t.Errorf("end to end ledger: %+v, want every operation succeeded with exactly one order", o)
	}
	res := &results{Plan: tinyPlan, E2E: []e2eResult{r}, ReconcileEvery: e.reconcileEvery}
	var out bytes.Buffer
	writeReport(&out, res)
	for _, want := range []string{"statement every 1s beside it", "runs, complete", "findings for a person"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("the report has no %q:\n%s", want, out.String())
		}
	}
}

// TestNotifyStage runs the notify stage once at a tiny size and checks
// its counts: both open loops sent every operation, the healthy receiver
// heard every settled operation while the hanging one held at least one
// request and no more than its concurrency, and the report has row 9.
// It asserts no timing: the latencies are the stage's to compare.
func TestNotifyStage(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	e := &env{adminURL: testdb.AdminURL(), natsURL: testnats.URL()}
	var err error
	if e.supplier, err = startSupplier(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.supplier.close)
	res := &results{Plan: tinyPlan}
	if err := benchNotify(ctx, e, tinyPlan, res); err != nil {
		t.Fatal(err)
	}
	r := res.Notify[0]
	if r.WithoutOps != 100 || r.WithOps != 100 || r.Abandoned != 0 || r.Without.N != 100 || r.With.N != 100 {
		t.Errorf("open loops: %d and %d sent (%d and %d latencies), %d abandoned; want 100, 100, none", r.WithoutOps, r.WithOps, r.Without.N, r.With.N, r.Abandoned)
	}
	if r.HealthyMissing != 0 || r.HangingHeld < 1 || r.HangingHeld > notifyConcurrency {
		t.Errorf("the healthy receiver missed %d operations, the hanging one held %d requests; want 0 and 1 … %d", r.HealthyMissing, r.HangingHeld, notifyConcurrency)
	}
	var out bytes.Buffer
	writeReport(&out, res)
	for _, want := range []string{"hanging receiver", "p99 ms, hanging + healthy", "healthy receiver: operations not heard", "hanging receiver: requests held"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("the report has no %q:\n%s", want, out.String())
		}
	}
}
