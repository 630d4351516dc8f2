package main

import (
	"errors"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/actledger/actledger/internal/resources"
)

// actbenchReport is the end-to-end part of a real `actbench --quick
// --stages e2e` report.
const actbenchReport = `
#  stage                             figure                            median   [min … max]          vs limit                     target     result
5  end to end, 1,000/s open loop     accepted ops/s                    984      [984 … 984]          0.98× offered
                                     completed ops/s                   495      [495 … 495]          0.49× offered
                                     p50 ms                            1363.40  [1363.40 … 1363.40]
                                     p99 ms                            2005.52  [2005.52 … 2005.52]                               ≤ 50 ms    MISS
                                     max ms                            2109.52  [2109.52 … 2109.52]
                                     ops abandoned (overloaded)        32       [32 … 32]                                         0          MISS
5  end to end, maximum (16 clients)  completed ops/s, sustained        1,378    [1,378 … 1,378]      –                            ≥ 2,500/s  MISS
6  duplicates (mock supplier)        operations ≠ 1 order              0        [0 … 0]                                           0          PASS
                                     orders − operations, run          0        [0 … 0]              3,366 orders                 0          PASS
                                     operations left open              2        [2 … 2]                                           0          PASS
                                     operations not succeeded          0        [0 … 0]                                           0          PASS
7  cost: end to end, 1,000/s         CPU s/1,000 ops, this process     0.705    [0.705 … 0.705]      actledger + supplier + load
                                     CPU s/1,000 ops, Postgres         0.869    [0.869 … 0.869]
                                     CPU s/1,000 ops, nats-server      0.165    [0.165 … 0.165]
                                     CPU s/1,000 ops, other processes  0.050    [0.050 … 0.050]      not the benchmark's
                                     machine CPU busy                  89%      [89% … 89%]
7  cost: end to end, maximum         CPU s/1,000 ops, this process     0.550    [0.550 … 0.550]      actledger + supplier + load
                                     CPU s/1,000 ops, Postgres         0.606    [0.606 … 0.606]
                                     CPU s/1,000 ops, nats-server      0.122    [0.122 … 0.122]
                                     CPU s/1,000 ops, other processes  0.037    [0.037 … 0.037]      not the benchmark's
                                     machine CPU busy                  92%      [92% … 92%]
                                     WAL bytes/op                      5,072    [5,072 … 5,072]

How each figure was taken (docs/benchmarks.md explains the rows):
  7   CPU: getrusage of this process; /proc/PID/stat of nats-server, of the Postgres server processes and of the
      backends of this run's databases; /proc/stat for the machine. WAL: pg_current_wal_lsn() before and after
`

// TestParseActbenchReadsTheEndToEndFigures guards the coupling to
// actbench's report: a renamed row fails here, not silently in the table.
// The cost comes from the maximum's rows, not from the open loop's rows
// with the same labels above them.
func TestParseActbenchReadsTheEndToEndFigures(t *testing.T) {
	t.Parallel()
	var r result
	if err := parseActbench([]byte(actbenchReport), &r); err != nil {
		t.Fatal(err)
	}
	want := result{OpsPerSec: 1378, P50: fromMS(1363.40), P99: fromMS(2005.52), Abandoned: 32, Duplicates: 0, Open: 2,
		Cost: cost{PostgresMS: 0.606, ProcessMS: 0.550, NATSMS: 0.122, WALBytes: 5072}}
	if r.OpsPerSec != want.OpsPerSec || r.P50.Round(time.Microsecond) != want.P50.Round(time.Microsecond) ||
		r.P99.Round(time.Microsecond) != want.P99.Round(time.Microsecond) || r.Abandoned != want.Abandoned || r.Open != want.Open ||
		r.Cost != want.Cost {
		t.Fatalf("parsed %+v, want %+v", r, want)
	}
}

// TestParseActbenchRefusesAReportWithoutAFigure: a missing row, or a row
// only under another stage, is an error naming it.
func TestParseActbenchRefusesAReportWithoutAFigure(t *testing.T) {
	t.Parallel()
	withoutMaximumCost := actbenchReport[:strings.Index(actbenchReport, "7  cost: end to end, maximum")]
	for _, tc := range []struct {
		name, report, want string
	}{
		{"no report", "no report", `no "completed ops/s, sustained" line`},
		{"the cost of the open loop only", withoutMaximumCost, `no "CPU s/1,000 ops, Postgres" line under "cost: end to end, maximum"`},
		{"no WAL row", strings.Replace(actbenchReport, "WAL bytes/op", "WAL", 1), `no "WAL bytes/op" line`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var r result
			err := parseActbench([]byte(tc.report), &r)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("parse error %v, want one with %q", err, tc.want)
			}
		})
	}
}

// TestCostPerOpDividesTheWindowByItsOperations: CPU milliseconds and WAL
// bytes per completed operation, and nothing for a window that completed
// none.
func TestCostPerOpDividesTheWindowByItsOperations(t *testing.T) {
	t.Parallel()
	u := resources.Use{Self: 600 * time.Millisecond, Postgres: 900 * time.Millisecond, NATS: 30 * time.Millisecond}
	for _, tc := range []struct {
		name string
		ops  int
		want cost
	}{
		{"1,500 operations", 1500, cost{PostgresMS: 0.6, ProcessMS: 0.4, NATSMS: 0.02, WALBytes: 2000}},
		{"none", 0, cost{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got := costPerOp(u, 3_000_000, tc.ops)
			const eps = 1e-9
			if math.Abs(got.PostgresMS-tc.want.PostgresMS) > eps || math.Abs(got.ProcessMS-tc.want.ProcessMS) > eps ||
				math.Abs(got.NATSMS-tc.want.NATSMS) > eps || got.WALBytes != tc.want.WALBytes {
				t.Fatalf("costPerOp = %+v, want %+v", got, tc.want)
			}
		})
	}
}

// TestTableShowsMediansAndTheRatiosWithinEachRound: three rounds of two
// systems print each one's median and range, and actledger's ratio to the
// peer both as the ratio of the medians and as the range of the ratios
// measured within one round, then the cost per operation of each; a
// failed round is counted, not averaged in.
func TestTableShowsMediansAndTheRatiosWithinEachRound(t *testing.T) {
	t.Parallel()
	ms := func(v float64) time.Duration { return fromMS(v) }
	rounds := [][]result{
		{
			{Name: "River", OpsPerSec: 800, P50: ms(5), P99: ms(40), Cost: cost{PostgresMS: 0.5, ProcessMS: 0.3, NATSMS: 0.001, WALBytes: 1500}},
			{Name: "actledger", OpsPerSec: 1000, P50: ms(9), P99: ms(20), Cost: cost{PostgresMS: 0.6, ProcessMS: 0.55, NATSMS: 0.12, WALBytes: 5072}},
		},
		{
			{Name: "River", OpsPerSec: 1000, P50: ms(6), P99: ms(50), Cost: cost{PostgresMS: 0.4, ProcessMS: 0.2, NATSMS: 0.003, WALBytes: 1700}},
			{Name: "actledger", OpsPerSec: 900, P50: ms(8), P99: ms(100), Abandoned: 3, Cost: cost{PostgresMS: 0.7, ProcessMS: 0.6, NATSMS: 0.14, WALBytes: 5100}},
		},
		{
			{Name: "River", Err: errors.New("boom")},
			{Name: "actledger", OpsPerSec: 1200, P50: ms(7), P99: ms(30), Cost: cost{PostgresMS: 0.5, ProcessMS: 0.5, NATSMS: 0.1, WALBytes: 5000}},
		},
	}
	var out strings.Builder
	printTable(&out, plan{Clients: 16, Closed: 6 * time.Second, Backlog: 500, Rate: 1000, Open: 8 * time.Second}, rounds)
	// Columns are aligned with spaces; compare words.
	got := strings.Join(strings.Fields(out.String()), " ")
	for _, want := range []string{
		"3 round(s)",
		// River: medians of 800 and 1000 (the failed round left out).
		"River 900 [800 … 1000] 5.5 45.0 [40.0 … 50.0] 0 0 0 1",
		"actledger 1000 [900 … 1200] 8.0 30.0 [20.0 … 100.0] 3 0 0 0",
		// 1000/900 = 1.11; per round 1000/800 = 1.25 and 900/1000 = 0.90.
		"River 1.11× [0.90× … 1.25×] 0.67× [0.50× … 2.00×]",
		// Cost: medians of each part, and of each round's total with its
		// range; the failed round left out.
		"system Postgres process nats-server total WAL bytes",
		"River 0.450 0.250 0.002 0.702 [0.603 … 0.801] 1600",
		"actledger 0.600 0.550 0.120 1.270 [1.100 … 1.440] 5072",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("table lacks %q:\n%s", want, out.String())
		}
	}
}

// TestCostTableLeavesOutWhatWasNotMeasured: a round that completed no
// operation in the closed loop's window has no cost to divide and is left
// out of the medians; a system with no such round shows dashes, a failed
// one says so.
func TestCostTableLeavesOutWhatWasNotMeasured(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		rounds []result
		want   string
	}{
		{"a stalled round left out", []result{
			{Name: "Watermill", Cost: cost{PostgresMS: 0.8, ProcessMS: 0.4, NATSMS: 0.2, WALBytes: 2000}},
			{Name: "Watermill"},
		}, "Watermill 0.800 0.400 0.200 1.400 2000"},
		{"no round completed anything", []result{{Name: "Watermill"}, {Name: "Watermill"}}, "Watermill – – – – –"},
		{"every round failed", []result{{Name: "Watermill", Err: errors.New("boom")}}, "Watermill failed"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var rounds [][]result
			for _, r := range tc.rounds {
				rounds = append(rounds, []result{r})
			}
			var out strings.Builder
			printCost(&out, []summary{summarize(rounds, 0)})
			got := strings.Join(strings.Fields(out.String()), " ")
			if !strings.HasSuffix(got, "WAL bytes "+tc.want) {
				t.Errorf("cost table ends %q, want the row %q:\n%s", got[max(0, len(got)-60):], tc.want, out.String())
			}
		})
	}
}

// TestTableComparesActledgerWithTheStatementScheduleWithoutIt: the stage
// run again with a statement every 10 s is a system of its own, left out
// of the ratios to the peers, and compared with actledger without it: the
// ratio of the medians and the range of the ratios within one round.
func TestTableComparesActledgerWithTheStatementScheduleWithoutIt(t *testing.T) {
	t.Parallel()
	ms := func(v float64) time.Duration { return fromMS(v) }
	pl := plan{Clients: 16, Closed: 6 * time.Second, Backlog: 500, Rate: 1000, Open: 8 * time.Second, StatementEvery: 10 * time.Second}
	with := statementSystem(pl)
	rounds := [][]result{
		{
			{Name: "River", OpsPerSec: 800, P50: ms(5), P99: ms(40)},
			{Name: "actledger", OpsPerSec: 1000, P50: ms(10), P99: ms(20)},
			{Name: with, OpsPerSec: 900, P50: ms(12), P99: ms(30)},
		},
		{
			{Name: "River", OpsPerSec: 1000, P50: ms(6), P99: ms(50)},
			{Name: "actledger", OpsPerSec: 1200, P50: ms(10), P99: ms(40)},
			{Name: with, OpsPerSec: 1200, P50: ms(10), P99: ms(40)},
		},
	}
	var out strings.Builder
	printTable(&out, pl, rounds)
	got := strings.Join(strings.Fields(out.String()), " ")
	for _, want := range []string{
		"actledger+statement/10s 1050 [900 … 1200] 11.0 35.0",
		// 1050/1100 = 0.95; per round 0.90 and 1.00. p50 11/10; p99 35/30.
		"with ÷ without 0.95× [0.90× … 1.00×] 1.10× [1.00× … 1.20×] 1.17× [1.00× … 1.50×]",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("table lacks %q:\n%s", want, out.String())
		}
	}
	peers := got[strings.Index(got, "actledger ÷ peer"):strings.Index(got, "with a statement run")]
	if !strings.Contains(peers, "River") || strings.Contains(peers, with) {
		t.Errorf("the ratios to the peers should name River and not %s: %q", with, peers)
	}
}
