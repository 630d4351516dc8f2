package retention_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/actledger/actledger/internal/mocksupplier"
	"github.com/actledger/actledger/internal/testfactory"
	"github.com/actledger/actledger/internal/testpipeline"
	"github.com/actledger/actledger/ledger"
	"github.com/actledger/actledger/retention"
)

// retentionPeriod is the tests' retention: 90 days.
const retentionPeriod = 90 * 24 * time.Hour

// backdate moves operations ids 100 days into the past, as if they had
// been created and settled then (their events keep their own times: the
// history is append-only, and the pruner judges the operation's times).
func backdate(t *testing.T, p *testpipeline.Pipeline, ids ...uuid.UUID) {
	t.Helper()
	testfactory.Backdate(t, p.Pool, 100*24*time.Hour, ids...)
}

// pruner is a Pruner of p's ledger archiving to dir.
func pruner(t *testing.T, p *testpipeline.Pipeline, dir string, batch int) *retention.Pruner {
	t.Helper()
	pr, err := retention.New(retention.Config{Store: p.Store, Pool: p.Pool, OlderThan: retentionPeriod, Archive: dir, Batch: batch})
	if err != nil {
		t.Fatal(err)
	}
	return pr
}

// apiView is what an operator reads of op over HTTP: GET
// /v1/operations/{id} and its events, in an archive line's shape.
func apiView(t *testing.T, p *testpipeline.Pipeline, id uuid.UUID) map[string]any {
	t.Helper()
	status, op := p.Do("GET", "/v1/operations/"+id.String(), p.Operator, "")
	if status != 200 {
		t.Fatalf("GET operation %s: %d %v", id, status, op)
	}
	status, events := p.Do("GET", "/v1/operations/"+id.String()+"/events", p.Operator, "")
	if status != 200 || events["next"] != nil {
		t.Fatalf("GET events of %s: %d %v", id, status, events)
	}
	return map[string]any{"operation": op, "events": events["events"]}
}

// archived reads every line of every archive file in dir, by operation
// id, failing on a line that is not a JSON object or names an operation
// twice.
func archived(t *testing.T, dir string) map[uuid.UUID]map[string]any {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "*.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	out := map[uuid.UUID]map[string]any{}
	for _, name := range files {
		f, err := os.Open(name)
		if err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(f)
		sc.Buffer(nil, 16<<20)
		for sc.Scan() {
			var line map[string]any
			if err := json.Unmarshal(sc.Bytes(), &line); err != nil {
				t.Fatalf("%s: a line is not JSON: %v: %q", name, err, sc.Text())
			}
			op, _ := line["operation"].(map[string]any)
			id, err := uuid.Parse(fmt.Sprint(op["id"]))
			if err != nil {
				t.Fatalf("%s: a line names no operation: %q", name, sc.Text())
			}
			if _, twice := out[id]; twice {
				t.Fatalf("operation %s is archived twice", id)
			}
			out[id] = line
		}
		if err := sc.Err(); err != nil {
			t.Fatal(err)
		}
		_ = f.Close()
	}
	return out
}

// exists says whether operation id is still in the ledger.
func exists(t *testing.T, p *testpipeline.Pipeline, id uuid.UUID) bool {
	t.Helper()
	var n int
	if err := p.Pool.QueryRow(context.Background(), `SELECT count(*) FROM operations WHERE id = $1`, id).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n == 1
}

// rowsOf counts the rows of the tables a prune deletes that name ids.
func rowsOf(t *testing.T, p *testpipeline.Pipeline, ids []uuid.UUID) (ops, events int) {
	t.Helper()
	if err := p.Pool.QueryRow(context.Background(), `SELECT (SELECT count(*) FROM operations WHERE id = ANY ($1)),
    (SELECT count(*) FROM operation_events WHERE operation_id = ANY ($1))`, ids).Scan(&ops, &events); err != nil {
		t.Fatal(err)
	}
	return ops, events
}

// orphanRows counts the rows that name a row that does not exist, for
// each reference the ledger keeps without a foreign key (schema 036).
const orphanRows = `SELECT
    (SELECT count(*) FROM operation_events e WHERE NOT EXISTS (SELECT 1 FROM operations o WHERE o.id = e.operation_id)),
    (SELECT count(*) FROM operation_events e JOIN operations o ON o.id = e.operation_id WHERE e.tenant_id <> o.tenant_id),
    (SELECT count(*) FROM operations o WHERE NOT EXISTS (SELECT 1 FROM tenants t WHERE t.id = o.tenant_id)),
    (SELECT count(*) FROM operations o WHERE o.approval_id IS NOT NULL AND NOT EXISTS (SELECT 1 FROM approvals a WHERE a.id = o.approval_id)),
    (SELECT count(*) FROM operations o WHERE NOT EXISTS (SELECT 1 FROM api_tokens k WHERE k.id = o.requested_by))`

// orphans says which references of p's ledger name nothing ("" when
// none do).
func orphans(t *testing.T, p *testpipeline.Pipeline) string {
	t.Helper()
	var events, tenantOfEvent, tenants, approvals, tokens int
	if err := p.Pool.QueryRow(context.Background(), orphanRows).Scan(&events, &tenantOfEvent, &tenants, &approvals, &tokens); err != nil {
		t.Fatal(err)
	}
	if events+tenantOfEvent+tenants+approvals+tokens == 0 {
		return ""
	}
	return fmt.Sprintf("events without their operation %d, events of another tenant than their operation's %d, "+
		"operations without their tenant %d, approval %d, token %d", events, tenantOfEvent, tenants, approvals, tokens)
}

// succeededCount is the count of succeeded operations /metrics reports
// (schema 011's folded counts and deltas).
func succeededCount(t *testing.T, p *testpipeline.Pipeline) int64 {
	t.Helper()
	var n int64
	if err := p.Pool.QueryRow(context.Background(), `SELECT coalesce(sum(n), 0)::bigint FROM (
    SELECT n FROM operation_counts WHERE status = 'succeeded'
    UNION ALL SELECT delta FROM operation_count_deltas WHERE status = 'succeeded') c`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// settledOld runs n operations through the pipeline to succeeded and
// backdates them past the retention period.
func settledOld(t *testing.T, p *testpipeline.Pipeline, prefix string, n int) []uuid.UUID {
	t.Helper()
	ops := make([]ledger.Operation, n)
	for i := range ops {
		ops[i] = p.Enqueue(fmt.Sprintf("%s-%d", prefix, i), fmt.Sprintf(`{"sku":"%s-%d"}`, prefix, i))
	}
	ids := make([]uuid.UUID, n)
	for i, op := range ops {
		p.WaitStatus(op, ledger.StatusSucceeded, 30*time.Second)
		ids[i] = op.ID
	}
	backdate(t, p, ids...)
	return ids
}

// TestPruneUnderLoadLosesNoLiveOperation: while agents keep proposing
// operations that the pipeline dispatches, a prune (batches of 20)
// archives and deletes 300 settled operations older than the retention
// period. Every live operation still completes with exactly one order at
// the supplier and stays in the ledger; every old one is gone with its
// whole history, and its archive line is readable JSON equal to what GET
// /v1/operations/{id} and its events answered before.
func TestPruneUnderLoadLosesNoLiveOperation(t *testing.T) {
	t.Parallel()
	p := testpipeline.New(t, testpipeline.Options{})
	p.Start(2)
	old := settledOld(t, p, "old", 300)
	want := make(map[uuid.UUID]map[string]any, len(old))
	for _, id := range old {
		want[id] = apiView(t, p, id)
	}
	dir := t.TempDir()
	pr := pruner(t, p, dir, 20)

	var live []ledger.Operation
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := range 150 {
			live = append(live, p.Enqueue(fmt.Sprintf("live-%d", i), fmt.Sprintf(`{"sku":"live-%d"}`, i)))
		}
	}()
	// The prune starts while the first live operations are in flight.
	p.Eventually(10*time.Second, "live operations flowing", func() bool {
		var n int
		_ = p.Pool.QueryRow(context.Background(), `SELECT count(*) FROM operations WHERE key LIKE 'live-%'`).Scan(&n)
		return n >= 10
	})
	sum, err := pr.Run(context.Background(), false)
	if err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	t.Logf("prune: %+v", sum)

	for _, op := range live {
		p.WaitStatus(op, ledger.StatusSucceeded, 30*time.Second)
		if n := p.Orders(op); n != 1 {
			t.Errorf("live operation %s: %d orders at the supplier, want 1", op.Key, n)
		}
	}
	if sum.Operations != int64(len(old)) || sum.ByStatus[ledger.StatusSucceeded] != int64(len(old)) {
		t.Errorf("pruned %d operations (%v), want the %d old ones", sum.Operations, sum.ByStatus, len(old))
	}
	if ops, events := rowsOf(t, p, old); ops != 0 || events != 0 {
		t.Errorf("after the prune %d old operations and %d of their events are left", ops, events)
	}
	if o := orphans(t, p); o != "" {
		t.Errorf("rows name rows that do not exist: %s", o)
	}
	got := archived(t, dir)
	if len(got) != len(old) {
		t.Errorf("the archive holds %d operations, want %d", len(got), len(old))
	}
	for id, w := range want {
		if g, ok := got[id]; !ok {
			t.Errorf("operation %s was deleted but is not in the archive", id)
		} else if !reflect.DeepEqual(g, w) {
			t.Errorf("operation %s: archive line\n%v\nis not the API's view\n%v", id, g, w)
		}
		if events := w["events"].([]any); len(events) < 3 {
			t.Errorf("operation %s: the API listed %d events, want its whole history", id, len(events))
		}
	}
}

// TestPruneNeverTakesReviewOpenOrCompensatedOperations: among operations
// all past the retention period, the prune takes the settled one and
// leaves an operation in review, a proposal nobody decided, and a settled
// operation whose compensation is still queued (dispatch of its provider
// paused). Once the compensation has succeeded and aged too, a run takes
// the compensation, and the run after it the operation it compensated.
func TestPruneNeverTakesReviewOpenOrCompensatedOperations(t *testing.T) {
	t.Parallel()
	p := testpipeline.New(t, testpipeline.Options{LookupLag: -1, Mode: mocksupplier.Ignore})
	p.Supplier.SetFaults("", mocksupplier.Fault{Kind: mocksupplier.DropAfterCommit}, mocksupplier.Fault{Kind: mocksupplier.DropAfterCommit})
	review := p.Enqueue("in-review", `{"sku":"R-1"}`)
	compensated := p.Enqueue("compensated", `{"sku":"R-2"}`)
	p.Start(1)
	p.WaitStatus(review, ledger.StatusReview, 15*time.Second)
	p.WaitStatus(compensated, ledger.StatusReview, 15*time.Second)
	done := settledOld(t, p, "done", 1)[0]
	status, proposal := p.Propose("proposal", `{"sku":"P-1"}`)
	if status != 202 && status != 201 {
		t.Fatalf("propose: %d %v", status, proposal)
	}
	proposed := p.Operation(proposal)

	if status, out := p.Do("POST", "/v1/dispatch/pause", p.Operator, fmt.Sprintf(`{"provider":%q}`, "beta")); status != 200 {
		t.Fatalf("pause: %d %v", status, out)
	}
	undo := p.ApproveAction(testpipeline.OtherAction, `{"order":"ord_1"}`, time.Hour)
	status, out := p.Do("POST", "/v1/operations/"+compensated.ID.String()+"/resolve", p.Operator, fmt.Sprintf(
		`{"outcome":"succeeded","provider_reference":"ord_1","note":"seen in the portal","compensation":{"action":%q,"key":"undo","params":{"order":"ord_1"},"approval_id":%q}}`,
		testpipeline.OtherAction, undo.ID))
	if status != 200 {
		t.Fatalf("resolve: %d %v", status, out)
	}
	comp := p.Operation(out["compensation"].(map[string]any))
	backdate(t, p, review.ID, compensated.ID, proposed.ID)

	dir := t.TempDir()
	pr := pruner(t, p, dir, 0)
	sum, err := pr.Run(context.Background(), false)
	if err != nil {
		t.Fatal(err)
	}
	if sum.Operations != 1 || exists(t, p, done) {
		t.Fatalf("first run pruned %d operations, want only the settled one %s (left: %v)", sum.Operations, done, exists(t, p, done))
	}
	for name, id := range map[string]uuid.UUID{"in review": review.ID, "proposal": proposed.ID, "compensated": compensated.ID, "compensation": comp.ID} {
		if !exists(t, p, id) {
			t.Errorf("the operation %s was pruned", name)
		}
	}

	if status, out := p.Do("POST", "/v1/dispatch/resume", p.Operator, `{"provider":"beta"}`); status != 200 {
		t.Fatalf("resume: %d %v", status, out)
	}
	p.WaitStatus(comp, ledger.StatusSucceeded, 15*time.Second)
	backdate(t, p, comp.ID)
	if sum, err = pr.Run(context.Background(), false); err != nil {
		t.Fatal(err)
	}
	if sum.Operations != 1 || exists(t, p, comp.ID) || !exists(t, p, compensated.ID) {
		t.Fatalf("second run pruned %d operations (compensation left: %v, compensated left: %v), want the compensation only",
			sum.Operations, exists(t, p, comp.ID), exists(t, p, compensated.ID))
	}
	if sum, err = pr.Run(context.Background(), false); err != nil {
		t.Fatal(err)
	}
	if sum.Operations != 1 || exists(t, p, compensated.ID) {
		t.Fatalf("third run pruned %d operations, want the compensated one", sum.Operations)
	}
	if !exists(t, p, review.ID) || !exists(t, p, proposed.ID) {
		t.Errorf("a later run pruned the operation in review or the proposal")
	}
	if got := archived(t, dir); len(got) != 3 {
		t.Errorf("the archive holds %d operations, want the 3 pruned", len(got))
	}
}

// failingWriter refuses every write, as a full disk does.
type failingWriter struct{}

func (failingWriter) Write([]byte) (int, error) { return 0, errors.New("no space left on device") }

// TestArchiveFailureDeletesNothing: when the archive cannot be written
// (its directory is gone, or the output refuses the write) the run fails
// and every old operation is still in the ledger with its history.
func TestArchiveFailureDeletesNothing(t *testing.T) {
	t.Parallel()
	p := testpipeline.New(t, testpipeline.Options{})
	p.Start(1)
	old := settledOld(t, p, "old", 30)
	_, eventsBefore := rowsOf(t, p, old)

	gone := t.TempDir()
	prGone := pruner(t, p, gone, 10)
	if err := os.Remove(gone); err != nil {
		t.Fatal(err)
	}
	full, err := retention.New(retention.Config{Store: p.Store, Pool: p.Pool, OlderThan: retentionPeriod,
		Archive: retention.Stdout, Stdout: failingWriter{}, Batch: 10})
	if err != nil {
		t.Fatal(err)
	}
	for name, pr := range map[string]*retention.Pruner{"directory gone": prGone, "write refused": full} {
		sum, err := pr.Run(context.Background(), false)
		if !errors.Is(err, ledger.ErrPruneArchive) {
			t.Errorf("%s: run answered %v, want ErrPruneArchive", name, err)
		}
		if sum.Operations != 0 {
			t.Errorf("%s: the summary counts %d operations pruned", name, sum.Operations)
		}
		if ops, events := rowsOf(t, p, old); ops != len(old) || events != eventsBefore {
			t.Errorf("%s: %d operations and %d events left, want %d and %d", name, ops, events, len(old), eventsBefore)
		}
	}
}

// TestDryRunDeletesNothingAndRerunIsIdempotent: a dry run counts what
// would go and deletes and archives nothing; the run after it deletes
// exactly what the dry run counted; a run after that finds nothing and
// writes no archive file.
func TestDryRunDeletesNothingAndRerunIsIdempotent(t *testing.T) {
	t.Parallel()
	p := testpipeline.New(t, testpipeline.Options{})
	p.Start(1)
	old := settledOld(t, p, "old", 40)
	_, events := rowsOf(t, p, old)
	dir := t.TempDir()
	pr := pruner(t, p, dir, 15)

	succeededBefore := succeededCount(t, p)
	dry, err := pr.Run(context.Background(), true)
	if err != nil {
		t.Fatal(err)
	}
	if dry.Operations != int64(len(old)) || dry.Events != int64(events) {
		t.Errorf("dry run counts %d operations and %d events, want %d and %d", dry.Operations, dry.Events, len(old), events)
	}
	if ops, evs := rowsOf(t, p, old); ops != len(old) || evs != events {
		t.Errorf("after a dry run %d operations and %d events are left, want all", ops, evs)
	}
	if files, _ := filepath.Glob(filepath.Join(dir, "*")); len(files) != 0 {
		t.Errorf("a dry run wrote %v", files)
	}

	real, err := pr.Run(context.Background(), false)
	if err != nil {
		t.Fatal(err)
	}
	if real.Operations != dry.Operations || real.Events != dry.Events {
		t.Errorf("the run pruned %d operations and %d events, the dry run counted %d and %d", real.Operations, real.Events, dry.Operations, dry.Events)
	}
	// The gauge of the ledger's operations loses them, the pruned counter
	// gains them (actledger_operations, actledger_operations_pruned_total).
	pruned, err := ledger.PrunedCounts(context.Background(), p.Pool)
	if err != nil {
		t.Fatal(err)
	}
	if n := succeededCount(t, p); n != succeededBefore-int64(len(old)) || pruned[ledger.StatusSucceeded] != int64(len(old)) {
		t.Errorf("succeeded in the ledger %d (before %d), pruned %d; want %d fewer in the ledger and %d pruned",
			n, succeededBefore, pruned[ledger.StatusSucceeded], len(old), len(old))
	}
	again, err := pr.Run(context.Background(), false)
	if err != nil {
		t.Fatal(err)
	}
	if again.Operations != 0 || again.Events != 0 || again.Archive != "" {
		t.Errorf("a rerun pruned %d operations and %d events into %q, want nothing", again.Operations, again.Events, again.Archive)
	}
	if files, _ := filepath.Glob(filepath.Join(dir, "*.jsonl")); len(files) != 1 {
		t.Errorf("archive files %v, want the first run's only", files)
	}
	if got := archived(t, dir); len(got) != len(old) {
		t.Errorf("the archive holds %d operations, want %d", len(got), len(old))
	}
}
