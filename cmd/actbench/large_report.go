package main

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"
)

// The large stage's targets: on the large ledger at least this share of
// the empty ledger's throughput, and at most this multiple of its p99.
const (
	largeMinThroughput = 0.9
	largeMaxP99        = 1.5
)

// largeLine is one figure of the large stage on both ledgers.
type largeLine struct {
	figure     string
	empty, big []float64
	format     func(float64) string
	// higher says more is better (a throughput); else less is (a
	// latency). target is the bound of big/empty, 0 for none.
	higher bool
	target float64
}

func largeLines(lr *largeResult, pl plan) []largeLine {
	var out []largeLine
	for j, n := range pl.APIClients {
		if len(lr.EmptyAPI) == 0 || len(lr.BigAPI) == 0 {
			break
		}
		get := func(reps [][]apiResult, f func(apiResult) float64) []float64 {
			return collect(reps, func(x []apiResult) float64 { return f(x[j]) })
		}
		rate := func(x apiResult) float64 { return x.Rate }
		p99 := func(x apiResult) float64 { return ms(x.Lat.P99) }
		l := largeLine{figure: fmt.Sprintf("API enqueue, %d client(s), ops/s", n), empty: get(lr.EmptyAPI, rate), big: get(lr.BigAPI, rate), format: thousands, higher: true}
		p := largeLine{figure: fmt.Sprintf("API enqueue, %d client(s), p99 ms", n), empty: get(lr.EmptyAPI, p99), big: get(lr.BigAPI, p99), format: millis}
		if n == pl.APIClients[len(pl.APIClients)-1] {
			l.target, p.target = largeMinThroughput, largeMaxP99
		}
		out = append(out, l, p)
	}
	if len(lr.EmptyE2E) > 0 && len(lr.BigE2E) > 0 {
		e2e := func(f func(e2eResult) float64, figure string, format func(float64) string, higher bool, target float64) {
			out = append(out, largeLine{figure: figure, empty: collect(lr.EmptyE2E, f), big: collect(lr.BigE2E, f), format: format, higher: higher, target: target})
		}
		offered := thousands(pl.E2ERate)
		e2e(func(x e2eResult) float64 { return x.Rate }, "end to end at "+offered+"/s, completed/s", thousands, true, 0)
		e2e(func(x e2eResult) float64 { return ms(x.Lat.P50) }, "end to end at "+offered+"/s, p50 ms", millis, false, 0)
		e2e(func(x e2eResult) float64 { return ms(x.Lat.P99) }, "end to end at "+offered+"/s, p99 ms", millis, false, largeMaxP99)
		e2e(func(x e2eResult) float64 { return x.MaxRate }, "end to end, maximum, completed/s", thousands, true, largeMinThroughput)
		e2e(func(x e2eResult) float64 { return per1000(x.MaxCPU.Postgres, x.MaxOps) }, "end to end, maximum, CPU s/1,000 ops, Postgres", seconds, false, 0)
		e2e(func(x e2eResult) float64 { return float64(x.MaxWAL) / float64(max(x.MaxOps, 1)) }, "end to end, maximum, WAL bytes/op", thousands, false, 0)
		e2e(func(x e2eResult) float64 { return float64(x.MaxFPI) / float64(max(x.MaxOps, 1)) }, "end to end, maximum, WAL full-page images/op", hundredths, false, 0)
	}
	return out
}

// writeLarge prints the large stage: the ledger, the same stages on an
// empty and on the large ledger side by side, and the bounded queries
// timed on it.
func writeLarge(w io.Writer, r *results) {
	lr, pl := r.Large, r.Plan
	f := lr.Fill
	fmt.Fprintf(w, "\nLarge ledger: %s, %s operations, %s events (fill %s", f.Database, thousands(float64(f.Operations)), thousands(float64(f.Events)), f.Version)
	if f.Reused {
		fmt.Fprintf(w, ", kept from %s", f.FilledAt.Format(time.DateTime))
	}
	fmt.Fprintf(w, "): written in %s, VACUUM (ANALYZE) %s\n", f.Fill.Round(time.Second), f.Vacuum.Round(time.Second))
	var states []string
	for _, s := range f.States {
		states = append(states, fmt.Sprintf("%s %s (%.2f%%)", s.Status, thousands(float64(s.N)), 100*float64(s.N)/float64(max(f.Operations, 1))))
	}
	fmt.Fprintf(w, "by state: %s\n", strings.Join(states, ", "))
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "table\trows\theap MiB\tindexes MiB\t")
	for _, t := range lr.Tables {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t\n", t.Table, thousands(float64(t.Rows)), thousands(float64(t.Heap)/(1<<20)), thousands(float64(t.Indexes)/(1<<20)))
	}
	tw.Flush()
	var idx []string
	for _, i := range lr.Indexes {
		idx = append(idx, fmt.Sprintf("%s %s", i.Index, thousands(float64(i.Bytes)/(1<<20))))
	}
	fmt.Fprintf(w, "operations' indexes, MiB: %s\n\n", strings.Join(idx, ", "))

	fmt.Fprintf(w, "The same stages on an empty ledger and on the large one, alternately, median of %d repetition(s) [min … max]:\n", len(lr.BigE2E))
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "figure\tempty\tlarge\tlarge/empty\ttarget\tresult")
	for _, l := range largeLines(lr, pl) {
		e, b := spreadOf(l.empty), spreadOf(l.big)
		var rat, target, result string
		if e.Median > 0 {
			rat = fmt.Sprintf("%.3f×", b.Median/e.Median)
		}
		if l.target > 0 && e.Median > 0 {
			if l.higher {
				target = fmt.Sprintf("≥ %.1f×", l.target)
				result = passIf(b.Median/e.Median >= l.target)
			} else {
				target = fmt.Sprintf("≤ %.1f×", l.target)
				result = passIf(b.Median/e.Median <= l.target)
			}
		}
		fmt.Fprintf(tw, "%s\t%s [%s … %s]\t%s [%s … %s]\t%s\t%s\t%s\n", l.figure, l.format(e.Median), l.format(e.Min), l.format(e.Max),
			l.format(b.Median), l.format(b.Min), l.format(b.Max), rat, target, result)
	}
	tw.Flush()
	for i, s := range lr.Stats {
		fmt.Fprintf(w, "operations over end-to-end repetition %d on the large ledger: %s updates, %s HOT (%.0f%%), %s dead rows after it\n", i+1,
			thousands(float64(s.Updates)), thousands(float64(s.HOT)), 100*float64(s.HOT)/float64(max(s.Updates, 1)), thousands(float64(s.Dead)))
	}
	fmt.Fprintf(w, "clean-up: %s operations the stage added were deleted; the VACUUM after the last clean-up took %s\n\n",
		thousands(float64(lr.Cleaned)), lr.CleanVacuum.Round(time.Millisecond))

	fmt.Fprintf(w, "Bounded queries on the large ledger (EXPLAIN ANALYZE, second run, rolled back):\n")
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "query\tms\trows read\tpages\tbounded\taccess")
	for _, q := range lr.Queries {
		bounded := "yes"
		if len(q.Problems) > 0 {
			bounded = "NO: " + strings.Join(q.Problems, "; ")
		}
		fmt.Fprintf(tw, "%s\t%.3f\t%s\t%s\t%s\t%s\n", q.Name, float64(q.Time)/float64(time.Millisecond), thousands(float64(q.RowsRead)),
			thousands(float64(q.PagesRead)), bounded, strings.Join(q.Access, "; "))
	}
	tw.Flush()
}
