package main

import (
	"cmp"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/actledger/actledger/internal/resources"
)

// line is one row of the table: a figure measured once per repetition.
type line struct {
	id, stage, figure string
	vals              []float64
	format            func(float64) string
	vs                string // the ratio to the limit the figure depends on
	target            string
	result            string // PASS, MISS or empty
}

// thousands formats v as a whole number with thousands separators.
func thousands(v float64) string {
	s := strconv.FormatInt(int64(math.Round(v)), 10)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	if neg {
		return "-" + b.String()
	}
	return b.String()
}

func millis(v float64) string { return strconv.FormatFloat(v, 'f', 2, 64) }

// hundredths formats a count per operation.
func hundredths(v float64) string { return strconv.FormatFloat(v, 'f', 2, 64) }

func seconds(v float64) string { return strconv.FormatFloat(v, 'f', 3, 64) }

func percent(v float64) string { return strconv.FormatFloat(v*100, 'f', 0, 64) + "%" }

// ratio formats a/b as "0.62× what", or "–" when b is unknown.
func ratio(a, b float64, what string) string {
	if b == 0 {
		return "–"
	}
	return fmt.Sprintf("%.2f× %s", a/b, what)
}

// offeredShare says which share of the two-INSERT limit an offered rate
// is, when the limit was measured.
func offeredShare(rate, limitTx float64) string {
	if limitTx == 0 {
		return ""
	}
	return "; offered " + ratio(rate, limitTx, "1a")
}

func passIf(ok bool) string {
	if ok {
		return "PASS"
	}
	return "MISS"
}

// collect gathers one figure from every repetition.
func collect[T, U any](reps []T, f func(T) U) []U {
	out := make([]U, len(reps))
	for i, r := range reps {
		out[i] = f(r)
	}
	return out
}

// median of a figure over the repetitions (0 when it was not measured).
func median(vals []float64) float64 { return spreadOf(vals).Median }

// lines builds the table from the results.
func lines(r *results) []line {
	var out []line
	add := func(l line) { out = append(out, l) }

	insRate := collect(r.Insert, func(x insertResult) float64 { return x.Rate })
	insP50 := collect(r.Insert, func(x insertResult) float64 { return ms(x.Lat.P50) })
	insP99 := collect(r.Insert, func(x insertResult) float64 { return ms(x.Lat.P99) })
	insPG := collect(r.Insert, func(x insertResult) float64 { return per1000(x.CPU.Postgres, x.Tx) })
	limitTx, limitP50, limitP99, limitPub, limitPG := median(insRate), median(insP50), median(insP99), median(r.Publish), median(insPG)
	if len(r.Insert) > 0 {
		stage := fmt.Sprintf("limit: two-INSERT tx, %d clients", r.Plan.InsertClients)
		add(line{id: "1a", stage: stage, figure: "tx/s", vals: insRate, format: thousands, vs: "the limit"})
		add(line{figure: "tx latency p50 ms", vals: insP50, format: millis})
		add(line{figure: "tx latency p99 ms", vals: insP99, format: millis})
		add(line{figure: "CPU s/1,000 tx, Postgres", vals: insPG, format: seconds})
		add(line{figure: "machine CPU busy", vals: collect(r.Insert, func(x insertResult) float64 { return x.CPU.Busy }), format: percent})
	}
	if len(r.Publish) > 0 {
		add(line{id: "1b", stage: "limit: JetStream async publish", figure: "msgs/s", vals: r.Publish, format: thousands, vs: "the limit"})
	}

	for j, n := range r.Plan.APIClients {
		if len(r.API) == 0 {
			break
		}
		get := func(f func(apiResult) float64) []float64 {
			return collect(r.API, func(x []apiResult) float64 { return f(x[j]) })
		}
		rate := get(func(x apiResult) float64 { return x.Rate })
		l := line{id: "2", stage: fmt.Sprintf("API enqueue, %d client(s)", n), figure: "ops/s", vals: rate, format: thousands,
			vs: ratio(median(rate), limitTx, "1a")}
		if n == 16 {
			l.target = "≥ 0.80× 1a"
			if limitTx > 0 {
				l.result = passIf(median(rate) >= 0.8*limitTx)
			}
		}
		add(l)
		p50 := get(func(x apiResult) float64 { return ms(x.Lat.P50) })
		p99 := get(func(x apiResult) float64 { return ms(x.Lat.P99) })
		add(line{figure: "p50 ms", vals: p50, format: millis, vs: ratio(median(p50), limitP50, "1a p50")})
		add(line{figure: "p99 ms", vals: p99, format: millis, vs: ratio(median(p99), limitP99, "1a p99")})
	}

	if len(r.Drain) > 0 {
		rate := collect(r.Drain, func(x drainResult) float64 { return x.Rate })
		m := median(rate)
		l := line{id: "3", stage: fmt.Sprintf("relay drain, %s-row backlog", thousands(float64(r.Plan.DrainRows))), figure: "rows/s",
			vals: rate, format: thousands, vs: ratio(m, limitPub, "1b"), target: "≥ 30,000/s and ≥ 0.25× 1b"}
		l.result = passIf(m >= 30000 && (limitPub == 0 || m >= 0.25*limitPub))
		add(l)
	}

	for j, rate := range r.Plan.LatencyRates {
		if len(r.Latency) == 0 {
			break
		}
		get := func(f func(latencyResult) float64) []float64 {
			return collect(r.Latency, func(x []latencyResult) float64 { return f(x[j]) })
		}
		stage := fmt.Sprintf("enqueue → published, %s/s open loop", thousands(rate))
		accepted := get(func(x latencyResult) float64 { return perSecond(x.Ops, r.Plan.LatencyDuration) })
		add(line{id: "4", stage: stage, figure: "accepted ops/s", vals: accepted, format: thousands,
			vs: ratio(median(accepted), rate, "offered") + offeredShare(rate, limitTx)})
		add(line{figure: "p50 ms", vals: get(func(x latencyResult) float64 { return ms(x.Lat.P50) }), format: millis})
		p99 := get(func(x latencyResult) float64 { return ms(x.Lat.P99) })
		l := line{figure: "p99 ms", vals: p99, format: millis}
		if rate == 2500 {
			abandoned := get(func(x latencyResult) float64 { return float64(x.Abandoned) })
			l.target, l.result = "≤ 15 ms", passIf(median(p99) <= 15 && sum(abandoned) == 0)
		}
		add(l)
		add(line{figure: "max ms", vals: get(func(x latencyResult) float64 { return ms(x.Lat.Max) }), format: millis})
		addAbandoned(add, get(func(x latencyResult) float64 { return float64(x.Abandoned) }))
	}

	if len(r.E2E) > 0 {
		e := r.E2E
		offered := e[0].Offered
		rate := collect(e, func(x e2eResult) float64 { return x.Rate })
		accepted := collect(e, func(x e2eResult) float64 { return perSecond(x.Ops, r.Plan.E2EDuration) })
		add(line{id: "5", stage: fmt.Sprintf("end to end, %s/s open loop", thousands(offered)), figure: "accepted ops/s", vals: accepted, format: thousands,
			vs: ratio(median(accepted), offered, "offered")})
		add(line{figure: "completed ops/s", vals: rate, format: thousands, vs: ratio(median(rate), offered, "offered")})
		add(line{figure: "p50 ms", vals: collect(e, func(x e2eResult) float64 { return ms(x.Lat.P50) }), format: millis})
		p99 := collect(e, func(x e2eResult) float64 { return ms(x.Lat.P99) })
		l := line{figure: "p99 ms", vals: p99, format: millis}
		if offered == 1000 {
			abandoned := collect(e, func(x e2eResult) float64 { return float64(x.Abandoned) })
			l.target, l.result = "≤ 50 ms", passIf(median(p99) <= 50 && sum(abandoned) == 0)
		}
		add(l)
		add(line{figure: "max ms", vals: collect(e, func(x e2eResult) float64 { return ms(x.Lat.Max) }), format: millis})
		addAbandoned(add, collect(e, func(x e2eResult) float64 { return float64(x.Abandoned) }))
		maxRate := collect(e, func(x e2eResult) float64 { return x.MaxRate })
		add(line{id: "5", stage: fmt.Sprintf("end to end, maximum (%d clients)", e[0].MaxClients), figure: "completed ops/s, sustained",
			vals: maxRate, format: thousands, vs: ratio(median(maxRate), limitTx, "1a"),
			target: "≥ 2,500/s", result: passIf(median(maxRate) >= 2500)})

		notOne := collect(e, func(x e2eResult) float64 { return float64(x.Orders.Operations - x.Orders.ExactlyOne) })
		open := collect(e, func(x e2eResult) float64 { return float64(x.Orders.Open) })
		failed := collect(e, func(x e2eResult) float64 { return float64(x.Orders.Operations - x.Orders.Succeeded - x.Orders.Open) })
		// The supplier is the whole run's: the large stage's end-to-end
		// pipelines order from it too.
		ops := 0
		all := e
		if r.Large != nil {
			all = slices.Concat(e, r.Large.EmptyE2E, r.Large.BigE2E)
		}
		for _, x := range all {
			ops += x.Orders.Operations
		}
		add(line{id: "6", stage: "duplicates (mock supplier)", figure: "operations ≠ 1 order", vals: notOne, format: thousands,
			target: "0", result: passIf(sum(notOne) == 0)})
		add(line{figure: "orders − operations, run", vals: []float64{float64(r.TotalOrders - ops)}, format: thousands,
			vs: fmt.Sprintf("%s orders", thousands(float64(r.TotalOrders))), target: "0", result: passIf(r.TotalOrders == ops)})
		add(line{figure: "operations left open", vals: open, format: thousands, target: "0", result: passIf(sum(open) == 0)})
		add(line{figure: "operations not succeeded", vals: failed, format: thousands, target: "0", result: passIf(sum(failed) == 0)})
		if r.ReconcileEvery > 0 && e[0].Statements != nil {
			st := func(f func(scheduledRuns) float64) []float64 {
				return collect(e, func(x e2eResult) float64 { return f(*x.Statements) })
			}
			add(line{id: "5", stage: fmt.Sprintf("statement every %s beside it", r.ReconcileEvery), figure: "runs, complete",
				vals: st(func(s scheduledRuns) float64 { return float64(s.Complete) }), format: thousands,
				vs: fmt.Sprintf("of %s", thousands(median(st(func(s scheduledRuns) float64 { return float64(s.Runs) }))))})
			add(line{figure: "records read", vals: st(func(s scheduledRuns) float64 { return float64(s.records()) }), format: thousands})
			attention := st(func(s scheduledRuns) float64 { return float64(s.attention()) })
			add(line{figure: "findings for a person", vals: attention, format: thousands, target: "0", result: passIf(sum(attention) == 0)})
		}
	}

	notifyLines(add, r)
	statementLines(add, r)

	if len(r.API) > 0 {
		last := len(r.Plan.APIClients) - 1
		api := collect(r.API, func(x []apiResult) apiResult { return x[last] })
		addCost(add, fmt.Sprintf("cost: API enqueue, %d clients", r.Plan.APIClients[last]), "ops",
			collect(api, func(x apiResult) resources.Use { return x.CPU }), collect(api, func(x apiResult) int { return x.Ops }), limitPG)
		add(line{figure: "WAL bytes/op", format: thousands, vals: collect(api, func(x apiResult) float64 { return float64(x.WAL) / float64(x.Ops) })})
	}
	if len(r.Drain) > 0 {
		addCost(add, "cost: relay drain", "rows", collect(r.Drain, func(x drainResult) resources.Use { return x.CPU }),
			collect(r.Drain, func(x drainResult) int { return x.Rows }), -1)
	}
	if len(r.E2E) > 0 {
		e := r.E2E
		addCost(add, fmt.Sprintf("cost: end to end, %s/s", thousands(e[0].Offered)), "ops",
			collect(e, func(x e2eResult) resources.Use { return x.CPU }), collect(e, func(x e2eResult) int { return x.Ops }), limitPG)
		addCost(add, "cost: end to end, maximum", "ops",
			collect(e, func(x e2eResult) resources.Use { return x.MaxCPU }), collect(e, func(x e2eResult) int { return x.MaxOps }), limitPG)
		add(line{figure: "WAL bytes/op", format: thousands, vals: collect(e, func(x e2eResult) float64 { return float64(x.MaxWAL) / float64(x.MaxOps) })})
		add(line{figure: "WAL full-page images/op", format: hundredths, vals: collect(e, func(x e2eResult) float64 { return float64(x.MaxFPI) / float64(x.MaxOps) })})
	}
	if len(r.Statement) > 0 {
		for j, n := range r.Plan.StatementRecords {
			runs := collect(r.Statement, func(x []statementResult) statementResult { return x[j] })
			addCost(add, fmt.Sprintf("cost: statement run, %s records", thousands(float64(n))), "records",
				collect(runs, func(x statementResult) resources.Use { return x.CPU }), collect(runs, func(x statementResult) int { return x.Records }), -1)
		}
	}
	return out
}

// per1000 is CPU seconds per 1,000 units (operations, rows).
func per1000(cpu time.Duration, n int) float64 {
	if n == 0 {
		return 0
	}
	return cpu.Seconds() * 1000 / float64(n)
}

// addCost adds the CPU rows of one stage: seconds per 1,000 units (ops,
// rows) by who spent them, and how busy the machine was. Postgres's share
// is compared with its cost of one two-INSERT transaction (limitPG, CPU
// s/1,000 tx; 0 when unknown, negative when no comparison makes sense).
func addCost(add func(line), stage, unit string, cpu []resources.Use, n []int, limitPG float64) {
	per := func(f func(resources.Use) time.Duration) []float64 {
		out := make([]float64, len(cpu))
		for i, u := range cpu {
			out[i] = per1000(f(u), n[i])
		}
		return out
	}
	figure := "CPU s/1,000 " + unit + ", "
	add(line{id: "7", stage: stage, figure: figure + "this process", format: seconds, vals: per(func(u resources.Use) time.Duration { return u.Self }),
		vs: "actledger + supplier + load"})
	pg := per(func(u resources.Use) time.Duration { return u.Postgres })
	l := line{figure: figure + "Postgres", format: seconds, vals: pg}
	if limitPG >= 0 {
		l.vs = ratio(median(pg), limitPG, "1a")
	}
	add(l)
	add(line{figure: figure + "nats-server", format: seconds, vals: per(func(u resources.Use) time.Duration { return u.NATS })})
	add(line{figure: figure + "other processes", format: seconds, vals: per(func(u resources.Use) time.Duration { return u.Other() }),
		vs: "not the benchmark's"})
	add(line{figure: "machine CPU busy", format: percent, vals: collect(cpu, func(u resources.Use) float64 { return u.Busy })})
}

// addAbandoned adds a row for the operations an open loop abandoned, if it
// abandoned any: the system could not keep up with the offered rate, and
// the latencies are those of the operations it did send.
func addAbandoned(add func(line), abandoned []float64) {
	if sum(abandoned) == 0 {
		return
	}
	add(line{figure: "ops abandoned (overloaded)", vals: abandoned, format: thousands, target: "0", result: "MISS"})
}

func sum(vals []float64) float64 {
	var s float64
	for _, v := range vals {
		s += v
	}
	return s
}

// writeReport prints the machine facts, the table and how each figure was
// taken.
func writeReport(w io.Writer, r *results) {
	f := r.Facts
	fmt.Fprintln(w, "actbench: actledger against this machine's own limits, measured in one run")
	fmt.Fprintf(w, "  code         %s\n", cmp.Or(f.Revision, "unknown revision"))
	fmt.Fprintf(w, "  machine      %d cores, GOMAXPROCS %d, %s; load average at the start %s\n", f.Cores, f.GOMAXPROCS, f.GoVersion, cmp.Or(f.Load, "unknown"))
	fmt.Fprintf(w, "  postgres     %s: %s\n", f.Postgres, f.PostgresSettings)
	fmt.Fprintf(w, "  nats-server  %s: JetStream %s\n", f.NATS, f.JetStream)
	fmt.Fprintln(w, "  process      actledger (API, relay, dispatcher), the mock supplier and the load generator share this")
	fmt.Fprintln(w, "               one process; Postgres and nats-server run beside it on the same cores")
	fmt.Fprintf(w, "  figures      median of %d repetition(s) [min … max], each on a fresh database and fresh streams; the run took %s\n\n",
		r.Plan.Reps, r.Elapsed.Round(time.Second))

	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "#\tstage\tfigure\tmedian\t[min … max]\tvs limit\ttarget\tresult")
	for _, l := range lines(r) {
		s := spreadOf(l.vals)
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t[%s … %s]\t%s\t%s\t%s\n", l.id, l.stage, l.figure,
			l.format(s.Median), l.format(s.Min), l.format(s.Max), l.vs, l.target, l.result)
	}
	tw.Flush()
	if r.Large != nil {
		writeLarge(w, r)
	}

	pl := r.Plan
	fmt.Fprintln(w)
	fmt.Fprintln(w, "How each figure was taken (docs/benchmarks.md explains the rows):")
	fmt.Fprintf(w, "  1a  BEGIN; INSERT op-like row; INSERT outbox-like row; COMMIT, in a scratch database, %d clients, %s per repetition\n",
		pl.InsertClients, pl.InsertDuration)
	fmt.Fprintf(w, "  1b  %s publishes with Nats-Msg-Id to a file-storage stream, at most 4,096 acknowledgements pending\n", thousands(float64(pl.PublishMessages)))
	fmt.Fprintf(w, "  2   closed loop, %s per client count; each request a new operation under the client's own approval\n", pl.APIDuration)
	fmt.Fprintln(w, "  3   one relay as `actledger serve` configures it (default batch size), from its start to the last row deleted")
	fmt.Fprintf(w, "  4   open loop, %s per rate; from each operation's due time to an ordered consumer on the ops stream seeing it\n", pl.LatencyDuration)
	fmt.Fprintf(w, "  4,5 an open loop abandons (does not send, counts) an operation over %s late or due while over %s of the offered\n", pl.GiveUp, pl.GiveUp)
	fmt.Fprintln(w, "      rate is in flight: the system is overloaded, and the latencies are those of the operations sent")
	fmt.Fprintf(w, "  5   open loop for %s, success seen by polling the ledger every %s; maximum: closed loop of %d clients\n",
		pl.E2EDuration, ledgerPollInterval, pl.MaxClients)
	fmt.Fprintf(w, "      for %s held at most %s operations ahead of the supplier, successes within the window per second\n",
		pl.MaxDuration, thousands(float64(pl.MaxBacklog)))
	fmt.Fprintln(w, "  6   every operation of the end-to-end ledgers against the mock supplier's order count for its external key")
	fmt.Fprintln(w, "  7   CPU: getrusage of this process; /proc/PID/stat of nats-server, of the Postgres server processes and of the")
	fmt.Fprintln(w, "      backends of this run's databases; /proc/stat for the machine. WAL: pg_current_wal_lsn() before and after")
	if len(r.Notify) > 0 {
		fmt.Fprintf(w, "  9   open loop at %s/s for %s on a pipeline without receivers, then on one with a receiver that never answers and a\n",
			thousands(pl.NotifyRate), pl.NotifyDuration)
		fmt.Fprintf(w, "      healthy one, both of operation.settled (%d requests in flight each at most); enqueue → succeeded as in 5\n", notifyConcurrency)
	}
	if len(r.Statement) > 0 {
		fmt.Fprintln(w, "  8   one statement.Runner.Run per window, the mock supplier listing it 100 a page (computed, not stored), against as many")
		fmt.Fprintln(w, "      operations written set-based; RSS: VmRSS before, VmHWM after (reset by /proc/self/clear_refs at the start), of this")
		fmt.Fprintln(w, "      whole process (runner, supplier, pools); Go heap: runtime/metrics heap objects, sampled every 1 ms")
	}
}
