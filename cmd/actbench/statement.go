package main

import (
	"bufio"
	"context"
	"fmt"
	"maps"
	"os"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/actledger/actledger/internal/mocksupplier"
	"github.com/actledger/actledger/internal/resources"
	"github.com/actledger/actledger/ledger"
	"github.com/actledger/actledger/statement"
)

// The statement stage: one run of a provider's statement (statement.Runner,
// as `actledger reconcile` and the schedule run it) over a window of
// pl.StatementRecords supplier records, listed by the mock supplier 100 a
// page and computed from their index (mocksupplier.Generated), against as
// many operations written into the ledger set-based beforehand. In every
// block of stmtBlock records, all but a few match; the few are what a run
// must find among them (stmtKindOf).

// stmtReconcile is the provider's reconcile section: the demo's
// (demo/providers.yaml), a day's window, and pages enough for it.
func stmtReconcile(maxPages int) string {
	return demoReconcile(maxPages) +
		"      window: 24h\n" +
		"      lag: 1m\n"
}

// demoReconcile is the tenant line and the reconcile section's list and
// match of the demo supplier (demo/providers.yaml), reading at most
// maxPages; the callers add when and over what window it runs.
func demoReconcile(maxPages int) string {
	return "    tenant: " + benchTenant + "\n" +
		"    reconcile:\n" +
		"      list:\n" +
		"        path: \"/v1/statement?created_gte={since}&created_lt={until}&limit=100\"\n" +
		"        records: response.orders\n" +
		"        next: 'response.next != null ? {\"after\": response.next} : {}'\n" +
		"        reference: 'record.client_reference != \"\" ? record.client_reference : null'\n" +
		"        provider_reference: record.id\n" +
		"        created: record.created_at\n" +
		"        max_pages: " + strconv.Itoa(maxPages) + "\n" +
		"      match: 'record.params.sku == params.sku && (has(params.qty) ? record.params.qty == params.qty : !has(record.params.qty))'\n"
}

// stmtBlock is the size of the block of records in which each kind of
// record that is not a match occurs once.
const stmtBlock = 10_000

// stmtKind is what record i of the window is, and so what the ledger
// holds for it.
type stmtKind int

const (
	// stmtMatched: the operation succeeded with this record's order.
	stmtMatched stmtKind = iota
	// stmtMismatch: the operation was approved for another quantity.
	stmtMismatch
	// stmtDuplicateFirst is an operation's order; the next record is a
	// second order naming the same operation (stmtDuplicateSecond, which
	// has no operation of its own).
	stmtDuplicateFirst
	stmtDuplicateSecond
	// stmtUnexplained names an operation the ledger does not hold.
	stmtUnexplained
	// stmtForeign names no operation: made outside actledger.
	stmtForeign
	// stmtSettles names an operation whose outcome is unknown.
	stmtSettles
)

func stmtKindOf(i int) stmtKind {
	switch i % stmtBlock {
	case 1:
		return stmtMismatch
	case 2:
		return stmtDuplicateFirst
	case 3:
		return stmtDuplicateSecond
	case 4:
		return stmtUnexplained
	case 5:
		return stmtForeign
	case 6:
		return stmtSettles
	}
	return stmtMatched
}

// stmtMissingPerBlock operations succeeded inside the judged span with no
// record naming them: as many as the records above that have no
// operation, so that the ledger holds as many operations as the window
// records.
const stmtMissingPerBlock = 3

// stmtOperationID is the id of operation i: record i names it (its
// external key is the record's reference). The missing operations are
// numbered from 2·records, the unexplained records name numbers from
// 3·records, which no operation has.
func stmtOperationID(i int) uuid.UUID {
	return uuid.MustParse(fmt.Sprintf("00000000-0000-4000-8000-%012d", i))
}

// stmtParams are the params of every operation and every order; a
// mismatched operation was approved for qty 4.
const (
	stmtParams         = `{"qty": 3, "sku": "bolt-m8"}`
	stmtParamsMismatch = `{"qty": 4, "sku": "bolt-m8"}`
)

// stmtWindow is where the window of n records lies: a day ending a minute
// ago (the provider's window and lag), record i created at since + i·every.
func stmtWindow(now time.Time, n int) (since, until time.Time, every time.Duration) {
	until = now.Add(-time.Minute).Truncate(time.Second)
	since = until.Add(-24 * time.Hour)
	return since, until, 24 * time.Hour / time.Duration(n)
}

// stmtGenerated is the supplier's statement of the window.
func stmtGenerated(n int, since time.Time, every time.Duration) *mocksupplier.Generated {
	return &mocksupplier.Generated{
		Count: n, Start: since, Every: every, Params: []byte(`{"qty":3,"sku":"bolt-m8"}`),
		Adjust: func(i int, o *mocksupplier.Order) {
			switch stmtKindOf(i) {
			case stmtDuplicateSecond:
				o.ClientReference = ledger.ExternalKeyOfID(stmtOperationID(i - 1))
			case stmtUnexplained:
				o.ClientReference = ledger.ExternalKeyOfID(stmtOperationID(3*n + i))
			case stmtForeign:
				o.ClientReference = ""
			default:
				o.ClientReference = ledger.ExternalKeyOfID(stmtOperationID(i))
			}
		},
	}
}

// stmtExpected is what a complete run of the window must find.
func stmtExpected(n int) map[ledger.Finding]int64 {
	want := map[ledger.Finding]int64{}
	for i := range n {
		switch stmtKindOf(i) {
		case stmtMatched:
			want[ledger.FindingMatched]++
		case stmtMismatch:
			want[ledger.FindingMismatch]++
		case stmtDuplicateFirst:
			want[ledger.FindingDuplicate]++ // counted once per operation
		case stmtUnexplained:
			want[ledger.FindingUnexplained]++
		case stmtForeign:
			want[ledger.FindingForeign]++
		case stmtSettles:
			want[ledger.FindingSettles]++
		}
	}
	want[ledger.FindingMissing] = int64(stmtMissing(n))
	return want
}

// stmtMissing is how many succeeded operations no record names.
func stmtMissing(n int) int { return stmtMissingPerBlock * ((n + stmtBlock - 1) / stmtBlock) }

// stmtSeed writes the window's operations in one statement, set-based:
// operation i (when record i has one) created half a second before its
// order and succeeded half a second after it, with the order's id as its
// provider reference (the settling ones unknown, with none); then the
// missing ones, succeeded in the middle of the window. The table's
// triggers run as for any insert (the counts by state stay right).
const stmtSeed = `
WITH rec AS (
    SELECT i, @since::timestamptz + i * @every::interval AS at,
        CASE WHEN i % @block = 1 THEN 'mismatch' WHEN i % @block = 6 THEN 'settles' ELSE 'matched' END AS kind
    FROM generate_series(0, @n::int - 1) i
    WHERE i % @block NOT IN (3, 4, 5)
    UNION ALL
    SELECT 2 * @n::int + m, @since::timestamptz + interval '12 hours' + m * interval '1 second', 'missing'
    FROM generate_series(0, @missing::int - 1) m
), ops AS (
    SELECT i, at, kind, ('00000000-0000-4000-8000-' || lpad(i::text, 12, '0'))::uuid AS id,
        CASE WHEN kind = 'mismatch' THEN @params_mismatch::jsonb ELSE @params::jsonb END AS params,
        CASE WHEN kind = 'settles' THEN 'unknown' ELSE 'succeeded' END AS status
    FROM rec
)
INSERT INTO operations (id, tenant_id, action, key, provider, params, params_fingerprint,
    approval_id, requested_by, external_key, status, version, attempts,
    next_attempt_at, first_sent_at, last_sent_at, provider_reference, created_at, updated_at)
SELECT id, @tenant, @action, 'stmt-' || i, @provider, params, md5(params::text),
    @approval, @token, 'al_' || id::text, status, 4, 1,
    CASE WHEN status = 'unknown' THEN at + interval '5 minutes' END,
    at - interval '400 milliseconds', at - interval '400 milliseconds',
    CASE WHEN status = 'succeeded' AND kind <> 'missing' THEN 'ord_gen' || lpad(i::text, 8, '0')
         WHEN kind = 'missing' THEN 'ord_gone' || i END,
    at - interval '500 milliseconds', at + interval '500 milliseconds'
FROM ops`

// statementResult is one run of the statement stage over one window.
type statementResult struct {
	Records    int
	Operations int64
	Seed       time.Duration // writing the operations
	Took       time.Duration // the run, from its start to its report
	Pages      int
	Status     ledger.RunStatus
	Error      string
	Findings   map[ledger.Finding]int64
	Mem        memoryPeak
	CPU        resources.Use
}

// memoryPeak is what the process held over the run. RSS is the kernel's
// account of the whole process (every goroutine of the benchmark: the
// runner, the mock supplier serving its pages, the pools): VmRSS before
// the run and VmHWM after it, the high-water mark having been reset to the
// current RSS at the start (/proc/self/clear_refs, "5"). Heap is the Go
// heap's live and not yet swept objects (runtime/metrics
// /memory/classes/heap/objects:bytes), sampled every millisecond.
type memoryPeak struct {
	RSSBefore, RSSPeak   int64
	HeapBefore, HeapPeak uint64
	// HWMReset says whether the high-water mark could be reset; if not,
	// RSSPeak is the highest VmRSS sampled every millisecond.
	HWMReset bool
}

// benchStatement seeds a fresh ledger with the window's operations and runs
// its statement once, for each window size of the plan.
func benchStatement(ctx context.Context, e *env, pl plan, res *results) error {
	return repeat(ctx, pl, "statement reconciliation", func() error {
		var rep []statementResult
		for _, n := range pl.StatementRecords {
			r, err := statementRun(ctx, e, n)
			if err != nil {
				return fmt.Errorf("statement of %s records: %w", thousands(float64(n)), err)
			}
			rep = append(rep, r)
		}
		res.Statement = append(res.Statement, rep)
		return nil
	})
}

// statementRun is one run over a window of n records.
func statementRun(ctx context.Context, e *env, n int) (statementResult, error) {
	r := statementResult{Records: n}
	sup, err := serveSupplier(stmtReconcile(n/mocksupplier.MaxStatementLimit + 10))
	if err != nil {
		return r, err
	}
	defer sup.close()
	se := *e
	se.supplier, se.large = sup, nil
	p, err := newPipeline(ctx, &se, roles{})
	if err != nil {
		return r, err
	}
	defer p.close(ctx)
	since, until, every := stmtWindow(p.store.Now(), n)
	sup.SetGenerated(stmtGenerated(n, since, every))

	approval, err := p.approve(ctx)
	if err != nil {
		return r, err
	}
	start := time.Now()
	tag, err := p.db.pool.Exec(ctx, stmtSeed, pgx.NamedArgs{
		"since": since, "every": every, "block": stmtBlock, "n": n, "missing": stmtMissing(n),
		"params": stmtParams, "params_mismatch": stmtParamsMismatch, "tenant": p.tenantID, "action": benchAction,
		"provider": benchProvider, "approval": approval, "token": p.approver,
	})
	if err != nil {
		return r, fmt.Errorf("seed the operations: %w", err)
	}
	if _, err := p.db.pool.Exec(ctx, "VACUUM (ANALYZE) operations"); err != nil {
		return r, err
	}
	r.Seed, r.Operations = time.Since(start), tag.RowsAffected()
	logf("  %s operations written in %s (set-based), for %s records listed 100 a page", thousands(float64(r.Operations)),
		r.Seed.Round(time.Millisecond), thousands(float64(n)))

	mem := startMemory()
	cpu := resources.Start(databasePrefix)
	start = time.Now()
	rep, err := p.app.Statements.Run(ctx, benchProvider, statement.Options{Since: since, Until: until, Actor: "operator:actbench"})
	r.Took = time.Since(start)
	r.CPU = cpu.Stop()
	r.Mem = mem.stop()
	if err != nil {
		return r, err
	}
	r.Pages, r.Status, r.Findings = rep.Run.Pages, rep.Run.Status, rep.Run.Findings
	if rep.Run.Error != nil {
		r.Error = *rep.Run.Error
	}
	logf("  run %s in %s: %d pages, %s; peak RSS %s (%s before), Go heap peak %s (%s before)",
		r.Status, r.Took.Round(time.Millisecond), r.Pages, findingsText(r.Findings),
		mib(r.Mem.RSSPeak), mib(r.Mem.RSSBefore), mib(int64(r.Mem.HeapPeak)), mib(int64(r.Mem.HeapBefore)))
	if want := stmtExpected(n); r.Status != ledger.RunComplete || !maps.Equal(nonZero(r.Findings), want) {
		logf("  warning: the run ended %s (%s) with %s, want complete with %s", r.Status, r.Error, findingsText(r.Findings), findingsText(want))
	}
	return r, nil
}

func nonZero(m map[ledger.Finding]int64) map[ledger.Finding]int64 {
	out := map[ledger.Finding]int64{}
	for f, n := range m {
		if n != 0 {
			out[f] = n
		}
	}
	return out
}

// findingsText is the findings in the contract's order.
func findingsText(m map[ledger.Finding]int64) string {
	var parts []string
	for _, f := range ledger.Findings {
		if n := m[f]; n != 0 {
			parts = append(parts, fmt.Sprintf("%s %s", f, thousands(float64(n))))
		}
	}
	return strings.Join(parts, ", ")
}

// memoryMeter samples the process's memory until stop.
type memoryMeter struct {
	peak   memoryPeak
	done   chan struct{}
	wg     sync.WaitGroup
	mu     sync.Mutex
	sample []metrics.Sample
}

// startMemory collects the garbage and returns what it can to the system
// (so that the baseline is what the process holds, not what earlier
// stages left freed), resets the high-water mark of the RSS and starts
// sampling.
func startMemory() *memoryMeter {
	runtime.GC()
	debug.FreeOSMemory()
	m := &memoryMeter{done: make(chan struct{}), sample: []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}}
	m.peak.RSSBefore = procStatus("VmRSS")
	m.peak.HWMReset = os.WriteFile("/proc/self/clear_refs", []byte("5"), 0) == nil
	m.peak.HeapBefore = m.heap()
	m.peak.HeapPeak = m.peak.HeapBefore
	m.peak.RSSPeak = m.peak.RSSBefore
	m.wg.Add(1)
	go func() {
		defer m.wg.Done()
		t := time.NewTicker(time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-m.done:
				return
			case <-t.C:
				h := m.heap()
				var rss int64
				if !m.peak.HWMReset {
					rss = procStatus("VmRSS")
				}
				m.mu.Lock()
				m.peak.HeapPeak = max(m.peak.HeapPeak, h)
				m.peak.RSSPeak = max(m.peak.RSSPeak, rss)
				m.mu.Unlock()
			}
		}
	}()
	return m
}

func (m *memoryMeter) heap() uint64 {
	s := slices.Clone(m.sample)
	metrics.Read(s)
	if s[0].Value.Kind() != metrics.KindUint64 {
		return 0
	}
	return s[0].Value.Uint64()
}

// stop ends the sampling and reads the high-water mark.
func (m *memoryMeter) stop() memoryPeak {
	close(m.done)
	m.wg.Wait()
	p := m.peak
	p.HeapPeak = max(p.HeapPeak, m.heap())
	if p.HWMReset {
		p.RSSPeak = max(p.RSSPeak, procStatus("VmHWM"))
	}
	return p
}

// procStatus reads a field of /proc/self/status in bytes (0 when it
// cannot be read).
func procStatus(field string) int64 {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		name, rest, ok := strings.Cut(sc.Text(), ":")
		if !ok || name != field {
			continue
		}
		kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
		if err != nil {
			return 0
		}
		return kb * 1024
	}
	return 0
}

// stmtMaxSeconds is the contract's bound on a run over a window of
// stmtTargetRecords records.
const (
	stmtMaxSeconds    = 30
	stmtTargetRecords = 100_000
)

// statementLines are row 8: per window, the run's time and rate, its
// pages, the memory it took, and whether it found what the window holds.
// The growth of the peak over what the process held before the run is
// compared with the smallest window's: bounded by a page, it does not grow
// with the window.
func statementLines(add func(line), r *results) {
	if len(r.Statement) == 0 {
		return
	}
	mb := func(b float64) float64 { return b / (1 << 20) }
	var firstRSS, firstHeap float64
	for j, n := range r.Plan.StatementRecords {
		runs := collect(r.Statement, func(x []statementResult) statementResult { return x[j] })
		took := collect(runs, func(x statementResult) float64 { return x.Took.Seconds() })
		l := line{id: "8", stage: fmt.Sprintf("statement run, %s records", thousands(float64(n))), figure: "run s", vals: took, format: seconds,
			vs: fmt.Sprintf("%s operations", thousands(float64(runs[0].Operations)))}
		if n == stmtTargetRecords {
			l.target, l.result = fmt.Sprintf("≤ %d s", stmtMaxSeconds), passIf(median(took) <= stmtMaxSeconds)
		}
		add(l)
		add(line{figure: "records/s", vals: collect(runs, func(x statementResult) float64 { return float64(x.Records) / x.Took.Seconds() }), format: thousands})
		add(line{figure: "pages", vals: collect(runs, func(x statementResult) float64 { return float64(x.Pages) }), format: thousands})
		add(line{figure: "seeding the operations s", vals: collect(runs, func(x statementResult) float64 { return x.Seed.Seconds() }), format: seconds,
			vs: "set-based, before the run"})
		how := "VmHWM"
		if !runs[0].Mem.HWMReset {
			how = "VmRSS sampled"
		}
		add(line{figure: "peak RSS MiB, process", vals: collect(runs, func(x statementResult) float64 { return mb(float64(x.Mem.RSSPeak)) }), format: hundredths, vs: how})
		rss := collect(runs, func(x statementResult) float64 { return mb(float64(x.Mem.RSSPeak - x.Mem.RSSBefore)) })
		heap := collect(runs, func(x statementResult) float64 { return mb(float64(x.Mem.HeapPeak)) })
		heapGrowth := collect(runs, func(x statementResult) float64 { return mb(float64(x.Mem.HeapPeak) - float64(x.Mem.HeapBefore)) })
		rl := line{figure: "peak RSS − RSS before, MiB", vals: rss, format: hundredths}
		hl := line{figure: "Go heap peak MiB", vals: heap, format: hundredths}
		gl := line{figure: "Go heap peak − before, MiB", vals: heapGrowth, format: hundredths}
		if j == 0 {
			firstRSS, firstHeap = median(rss), median(heapGrowth)
		} else {
			w := thousands(float64(r.Plan.StatementRecords[0]))
			rl.vs = ratio(median(rss), firstRSS, "the "+w+"'s")
			gl.vs = ratio(median(heapGrowth), firstHeap, "the "+w+"'s")
		}
		add(rl)
		add(hl)
		add(gl)
		wrong := collect(runs, func(x statementResult) float64 {
			if x.Status == ledger.RunComplete && maps.Equal(nonZero(x.Findings), stmtExpected(x.Records)) {
				return 0
			}
			return 1
		})
		add(line{figure: "runs not as the window holds", vals: wrong, format: thousands, vs: findingsText(stmtExpected(n)),
			target: "0", result: passIf(sum(wrong) == 0)})
	}
}

// scheduledReconcile is the provider's reconcile section of
// --reconcile-every: a run every every over the last 2·every ending 2 s
// ago (so consecutive runs overlap and every record is read twice), the
// successes of all but 3 s at either end judged for missing orders.
func scheduledReconcile(every time.Duration) string {
	window := 2 * every
	skew := min(3*time.Second, window/4)
	return demoReconcile(10000) +
		"      every: " + every.String() + "\n" +
		"      window: " + window.String() + "\n" +
		"      lag: 2s\n" +
		"      skew: " + skew.String() + "\n"
}

// scheduledRuns is what the statement schedule did beside one end-to-end
// stage.
type scheduledRuns struct {
	Runs, Complete, Pages int
	Findings              map[ledger.Finding]int64
}

// attention is how many findings of the runs need a person.
func (s scheduledRuns) attention() int64 {
	var n int64
	for f, c := range s.Findings {
		if f != ledger.FindingMatched && f != ledger.FindingForeign {
			n += c
		}
	}
	return n
}

// records is how many records the runs read.
func (s scheduledRuns) records() int64 {
	var n int64
	for f, c := range s.Findings {
		if f != ledger.FindingMissing {
			n += c
		}
	}
	return n
}

// readScheduledRuns sums the pipeline's statement runs.
func readScheduledRuns(ctx context.Context, p *pipeline) (scheduledRuns, error) {
	s := scheduledRuns{Findings: map[ledger.Finding]int64{}}
	runs, err := p.store.StatementRuns(ctx, ledger.WholeTenant(p.tenantID), nil, 10_000)
	if err != nil {
		return s, err
	}
	for _, run := range runs {
		if run.Status == ledger.RunRunning {
			// The schedule still runs beside the stage when it is read:
			// a run under way has no verdict yet.
			continue
		}
		s.Runs++
		if run.Status == ledger.RunComplete {
			s.Complete++
		}
		s.Pages += run.Pages
		for f, n := range run.Findings {
			s.Findings[f] += n
		}
	}
	return s, nil
}
