package main

import (
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
