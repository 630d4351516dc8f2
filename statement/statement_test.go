package statement_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/actledger/actledger/auth"
	"github.com/actledger/actledger/internal/mocksupplier"
	"github.com/actledger/actledger/internal/testpipeline"
	"github.com/actledger/actledger/ledger"
)

const settle = 15 * time.Second

// setup is a pipeline whose provider acme has the statement above, no
// lookup, and a supplier that ignores idempotency keys: only a statement
// can settle a lost answer.
func setup(t *testing.T) *testpipeline.Pipeline {
	t.Helper()
	return testpipeline.New(t, testpipeline.Options{LookupLag: -1, Mode: mocksupplier.Ignore, ProviderExtra: testpipeline.ReconcileSection})
}

// succeed runs operations of the given skus through the real path and
// waits for each to succeed.
func succeed(t *testing.T, p *testpipeline.Pipeline, skus ...string) []ledger.Operation {
	t.Helper()
	var ops []ledger.Operation
	for i, sku := range skus {
		ops = append(ops, p.Enqueue(fmt.Sprintf("po-%d-%s", i, uuid.NewString()[:8]), fmt.Sprintf(`{"sku":%q}`, sku)))
	}
	for i, op := range ops {
		ops[i] = p.WaitStatus(op, ledger.StatusSucceeded, settle)
	}
	return ops
}

// reconcile runs acme's statement through POST /v1/reconciliations with
// an operator token, over the last hour, after the clock moved past the
// skew, and returns the answer.
func reconcile(t *testing.T, p *testpipeline.Pipeline, dryRun bool) map[string]any {
	t.Helper()
	p.Clock.Advance(2 * time.Second)
	until := p.Clock.Now().Add(-time.Millisecond).UTC().Format(time.RFC3339Nano)
	since := p.Clock.Now().Add(-time.Hour).UTC().Format(time.RFC3339Nano)
	body := fmt.Sprintf(`{"provider":"acme","since":%q,"until":%q,"dry_run":%t}`, since, until, dryRun)
	status, out := p.Do(http.MethodPost, "/v1/reconciliations", p.TokenFor(p.Tenant, auth.RoleOperator), body)
	if status != http.StatusOK {
		t.Fatalf("POST /v1/reconciliations = %d %v", status, out)
	}
	return out
}

// findings is the run's counts from an answer of POST /v1/reconciliations.
func findings(t *testing.T, out map[string]any) map[string]int {
	t.Helper()
	run := out["reconciliation"].(map[string]any)
	got := map[string]int{}
	for f, n := range run["findings"].(map[string]any) {
		if v := int(n.(float64)); v != 0 {
			got[f] = v
		}
	}
	return got
}

func status(out map[string]any) string {
	return out["reconciliation"].(map[string]any)["status"].(string)
}

func sameCounts(got, want map[string]int) bool {
	if len(got) != len(want) {
		return false
	}
	for k, v := range want {
		if got[k] != v {
			return false
		}
	}
	return true
}

// Every order the ledger made is on the statement: all matched, nothing
// for a person; two operations with identical params (under two keys)
// are two matched records, not a duplicate.
func TestStatementMatchesEveryOrderAndIdenticalParamsAreNoDuplicate(t *testing.T) {
	t.Parallel()
	p := setup(t)
	p.Start(1)
	ops := succeed(t, p, "A-1", "B-2", "C-3", "C-3")
	out := reconcile(t, p, false)
	if got, want := findings(t, out), map[string]int{"matched": 4}; !sameCounts(got, want) || status(out) != "complete" {
		t.Fatalf("run %s %v, want complete %v", status(out), got, want)
	}
	for _, op := range ops {
		if got := p.Get(op); got.Status != ledger.StatusSucceeded {
			t.Errorf("%s is %s after the run, want succeeded", op.Key, got.Status)
		}
		if n := p.Orders(op); n != 1 {
			t.Errorf("%s has %d orders at the supplier", op.Key, n)
		}
	}
}

// A create whose answer was lost, with no lookup and keys ignored, waits
// for a person; the statement lists its order and settles it succeeded
// with the order's reference, as a lookup would: one order, one create,
// and the history says the statement did it.
func TestLostAnswerIsSettledByTheStatementWithOneOrder(t *testing.T) {
	t.Parallel()
	p := setup(t)
	p.Supplier.SetFaults("", mocksupplier.Fault{Kind: mocksupplier.DropAfterCommit})
	op := p.Enqueue("po-lost", `{"sku":"A-1"}`)
	p.Start(1)
	p.WaitStatus(op, ledger.StatusReview, settle)
	out := reconcile(t, p, false)
	if got, want := findings(t, out), map[string]int{"settles": 1}; !sameCounts(got, want) {
		t.Fatalf("findings %v, want %v", got, want)
	}
	done := p.Get(op)
	if done.Status != ledger.StatusSucceeded || done.ProviderReference == nil || !strings.HasPrefix(*done.ProviderReference, "ord_") {
		t.Fatalf("operation is %s with reference %v, want succeeded with the order's", done.Status, done.ProviderReference)
	}
	if orders, creates := p.Orders(op), p.Creates(op); orders != 1 || creates != 1 {
		t.Fatalf("orders %d, create requests %d, want 1 and 1", orders, creates)
	}
	if kinds := strings.Join(p.Kinds(op), ","); !strings.HasSuffix(kinds, ",reconciled") {
		t.Fatalf("events %s: want the last to be reconciled", kinds)
	}
	again := reconcile(t, p, false)
	if got := findings(t, again); !sameCounts(got, map[string]int{"matched": 1}) {
		t.Fatalf("the next run finds %v, want it matched", got)
	}
}

// What the supplier holds that contradicts the ledger goes to a person,
// each with its reason, and the next run does not open it again: an
// order whose sku differs (mismatch), a second order for one reference
// (duplicate, counted once per operation), an order gone (missing), an
// order naming a reference no operation holds (unexplained), and an
// order made outside actledger (foreign: counted only).
func TestStatementSendsWhatContradictsTheLedgerToAPersonOnce(t *testing.T) {
	t.Parallel()
	p := setup(t)
	p.Start(1)
	ops := succeed(t, p, "A-1", "B-2", "C-3", "D-4")
	mismatched, duplicated, missing := ops[0], ops[1], ops[2]
	if err := p.Supplier.SetOrderParams(*mismatched.ProviderReference, json.RawMessage(`{"sku":"Z-9"}`)); err != nil {
		t.Fatal(err)
	}
	if _, err := p.Supplier.DuplicateOrder(duplicated.ExternalKey); err != nil {
		t.Fatal(err)
	}
	if _, err := p.Supplier.DuplicateOrder(duplicated.ExternalKey); err != nil {
		t.Fatal(err)
	}
	if err := p.Supplier.RemoveOrder(*missing.ProviderReference); err != nil {
		t.Fatal(err)
	}
	stranger := ledger.ExternalKeyOfID(uuid.New())
	p.Supplier.SeedOrder(mocksupplier.Seed{ClientReference: stranger, Params: json.RawMessage(`{"sku":"X"}`)})
	p.Supplier.SeedOrder(mocksupplier.Seed{Params: json.RawMessage(`{"sku":"by hand"}`)})

	out := reconcile(t, p, false)
	want := map[string]int{"matched": 1, "mismatch": 1, "duplicate": 1, "missing": 1, "unexplained": 1, "foreign": 1}
	if got := findings(t, out); !sameCounts(got, want) || status(out) != "complete" {
		t.Fatalf("run %s %v, want complete %v", status(out), got, want)
	}
	for _, c := range []struct {
		op     ledger.Operation
		reason ledger.ReviewReason
	}{{mismatched, ledger.ReasonEffectMismatch}, {duplicated, ledger.ReasonDuplicateEffect}, {missing, ledger.ReasonEffectMissing}} {
		got := p.Get(c.op)
		if got.Status != ledger.StatusReview || got.ReviewReason == nil || *got.ReviewReason != c.reason {
			t.Errorf("%s is %s (%v), want review %s", c.op.Key, got.Status, got.ReviewReason, c.reason)
		}
	}
	if got := p.Get(ops[3]); got.Status != ledger.StatusSucceeded {
		t.Errorf("the matched operation is %s", got.Status)
	}
	unmatched, err := p.Store.OpenUnmatched(context.Background(), ledger.WholeTenant(p.TenantID), nil, 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(unmatched) != 1 || unmatched[0].Reference != stranger {
		t.Fatalf("unmatched evidence %+v, want one for %s", unmatched, stranger)
	}
	histories := map[uuid.UUID]int{}
	for _, op := range ops[:3] {
		histories[op.ID] = len(p.Kinds(op))
	}

	again := reconcile(t, p, false)
	if got := findings(t, again); !sameCounts(got, map[string]int{"matched": 1, "mismatch": 1, "duplicate": 1, "unexplained": 1, "foreign": 1}) {
		t.Fatalf("the next run finds %v", got)
	}
	for _, op := range ops[:3] {
		if n := len(p.Kinds(op)); n != histories[op.ID] {
			t.Errorf("%s: the next run added %d events to an item already open", op.Key, n-histories[op.ID])
		}
	}
	if unmatched, _ := p.Store.OpenUnmatched(context.Background(), ledger.WholeTenant(p.TenantID), nil, 10); len(unmatched) != 1 {
		t.Fatalf("the next run left %d unmatched items, want the same one", len(unmatched))
	}
	if total := p.Supplier.TotalOrders(); total != 7 {
		t.Fatalf("the supplier holds %d orders, want 7: a run never creates", total)
	}
}

// A run that does not read its whole window never judges missing: a
// page that fails (401, 500, not JSON), a cursor that loops or more pages
// than max_pages stop the run, recorded with the reason, and the
// succeeded operation whose order is gone stays succeeded.
func TestRunThatDoesNotReadItsWindowJudgesNothingMissing(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		fault  mocksupplier.StatementFault
		status string
		says   string
	}{
		{"401", mocksupplier.StatementFault{Kind: mocksupplier.PageUnauthorized401, Page: 2}, "failed", "401"},
		{"500", mocksupplier.StatementFault{Kind: mocksupplier.PageError500, Page: 2}, "failed", "500"},
		{"not JSON", mocksupplier.StatementFault{Kind: mocksupplier.PageNotJSON, Page: 2}, "failed", "JSON"},
		{"loop", mocksupplier.StatementFault{Kind: mocksupplier.PageLoop, Page: 2}, "incomplete", "already read"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			p := setup(t)
			p.Start(1)
			ops := succeed(t, p, "A-1", "B-2", "C-3", "D-4", "E-5")
			gone := ops[4]
			if err := p.Supplier.RemoveOrder(*gone.ProviderReference); err != nil {
				t.Fatal(err)
			}
			p.Supplier.SetStatementFaults(tc.fault)
			out := reconcile(t, p, false)
			run := out["reconciliation"].(map[string]any)
			errText, _ := run["error"].(string)
			if status(out) != tc.status || !strings.Contains(errText, tc.says) {
				t.Fatalf("run %s %q, want %s naming %q", status(out), errText, tc.status, tc.says)
			}
			if got := findings(t, out); got["missing"] != 0 {
				t.Fatalf("findings %v: missing judged on a window not read", got)
			}
			if got := p.Get(gone); got.Status != ledger.StatusSucceeded {
				t.Fatalf("the operation whose order is gone is %s, want succeeded", got.Status)
			}
		})
	}
}

// A dry run judges and reports, and changes nothing: no operation moves,
// no run is recorded.
func TestDryRunReportsAndChangesNothing(t *testing.T) {
	t.Parallel()
	p := setup(t)
	p.Start(1)
	ops := succeed(t, p, "A-1", "B-2")
	if err := p.Supplier.RemoveOrder(*ops[0].ProviderReference); err != nil {
		t.Fatal(err)
	}
	out := reconcile(t, p, true)
	if got := findings(t, out); !sameCounts(got, map[string]int{"matched": 1, "missing": 1}) {
		t.Fatalf("dry run finds %v", got)
	}
	attention := out["attention"].([]any)
	if len(attention) != 1 || attention[0].(map[string]any)["finding"] != "missing" {
		t.Fatalf("attention %v, want the missing operation", attention)
	}
	if got := p.Get(ops[0]); got.Status != ledger.StatusSucceeded {
		t.Fatalf("a dry run moved the operation to %s", got.Status)
	}
	status, list := p.Do(http.MethodGet, "/v1/reconciliations", p.TokenFor(p.Tenant, auth.RoleOperator), "")
	if status != http.StatusOK || len(list["reconciliations"].([]any)) != 0 {
		t.Fatalf("GET /v1/reconciliations = %d %v, want no run recorded", status, list)
	}
}

// A provider with reconcile.every is run by the schedule, recorded with
// the schedule as its actor and listed by GET /v1/reconciliations; a
// token with an access scope sees no run (a run covers every scope).
func TestScheduledRunIsRecordedAndListedToWholeTenantOperators(t *testing.T) {
	t.Parallel()
	p := testpipeline.New(t, testpipeline.Options{LookupLag: -1, Mode: mocksupplier.Ignore,
		ProviderExtra: strings.Replace(testpipeline.ReconcileSection, "      window: 1h\n", "      window: 1h\n      every: 1h\n", 1)})
	p.Start(1)
	rep := p.StatementSchedule.TestSignals.Ran.WaitOrTimeout()
	if rep.Run.Status != ledger.RunComplete || rep.Run.Actor != "schedule" {
		t.Fatalf("scheduled run %+v", rep.Run)
	}
	status, list := p.Do(http.MethodGet, "/v1/reconciliations", p.TokenFor(p.Tenant, auth.RoleOperator), "")
	runs, _ := list["reconciliations"].([]any)
	if status != http.StatusOK || len(runs) != 1 || runs[0].(map[string]any)["id"] != rep.Run.ID.String() {
		t.Fatalf("GET /v1/reconciliations = %d %v, want the scheduled run", status, list)
	}
	status, list = p.Do(http.MethodGet, "/v1/reconciliations", p.ScopedToken("purchasing", auth.RoleOperator), "")
	if runs, _ := list["reconciliations"].([]any); status != http.StatusOK || len(runs) != 0 {
		t.Fatalf("a scoped operator got %d %v, want no run", status, list)
	}
}
