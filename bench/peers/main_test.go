package main

import (
	"errors"
	"strings"
	"testing"
	"time"
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
`

// TestParseActbenchReadsTheEndToEndFigures guards the coupling to
// actbench's report: a renamed row fails here, not silently in the table.
func TestParseActbenchReadsTheEndToEndFigures(t *testing.T) {
	var r result
	if err := parseActbench([]byte(actbenchReport), &r); err != nil {
		t.Fatal(err)
	}
	want := result{OpsPerSec: 1378, P50: fromMS(1363.40), P99: fromMS(2005.52), Abandoned: 32, Duplicates: 0, Open: 2}
	if r.OpsPerSec != want.OpsPerSec || r.P50.Round(time.Microsecond) != want.P50.Round(time.Microsecond) ||
		r.P99.Round(time.Microsecond) != want.P99.Round(time.Microsecond) || r.Abandoned != want.Abandoned || r.Open != want.Open {
		t.Fatalf("parsed %+v, want %+v", r, want)
	}
	if err := parseActbench([]byte("no report"), &r); err == nil {
		t.Fatal("a report without the end-to-end rows parsed")
	}
}

// TestTableShowsMediansAndTheRatiosWithinEachRound: three rounds of two
// systems print each one's median and range, and actledger's ratio to the
// peer both as the ratio of the medians and as the range of the ratios
// measured within one round; a failed round is counted, not averaged in.
func TestTableShowsMediansAndTheRatiosWithinEachRound(t *testing.T) {
	ms := func(v float64) time.Duration { return fromMS(v) }
	rounds := [][]result{
		{{Name: "River", OpsPerSec: 800, P50: ms(5), P99: ms(40)}, {Name: "actledger", OpsPerSec: 1000, P50: ms(9), P99: ms(20)}},
		{{Name: "River", OpsPerSec: 1000, P50: ms(6), P99: ms(50)}, {Name: "actledger", OpsPerSec: 900, P50: ms(8), P99: ms(100), Abandoned: 3}},
		{{Name: "River", Err: errors.New("boom")}, {Name: "actledger", OpsPerSec: 1200, P50: ms(7), P99: ms(30)}},
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
	} {
		if !strings.Contains(got, want) {
			t.Errorf("table lacks %q:\n%s", want, out.String())
		}
	}
}
