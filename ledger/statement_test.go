package ledger_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/actledger/actledger/internal/testfactory"
	"github.com/actledger/actledger/ledger"
)

// succeeded makes an operation of provider succeeded with reference ref.
func (f *fixture) succeeded(t *testing.T, provider, ref string) ledger.Operation {
	t.Helper()
	op := testfactory.Operation(t, f.store, testfactory.OperationOpts{Tenant: f.acme, Provider: provider})
	done, err := f.store.Transition(context.Background(), ledger.Change{
		ID: op.ID, From: op.Status, Version: op.Version, To: ledger.StatusSucceeded,
		Kind: ledger.EventEvidence, Actor: "test", ProviderReference: ref,
	})
	if err != nil {
		t.Fatal(err)
	}
	return done
}

func (f *fixture) startRun(t *testing.T, provider string, lease time.Duration) ledger.StatementRun {
	t.Helper()
	now := f.store.Now()
	run, err := f.store.StartStatementRun(context.Background(), ledger.NewStatementRun{
		Tenant: f.tenant, Provider: provider, Since: now.Add(-time.Hour), Until: now, Actor: "test", Lease: lease,
	})
	if err != nil {
		t.Fatal(err)
	}
	return run
}

// Two runs of one provider at once: the second is recorded as yielded,
// naming the run that holds the provider; once the first ends, a new run
// takes it. Another provider's run is not held back.
func TestSecondStatementRunOfAProviderYields(t *testing.T) {
	t.Parallel()
	f := setup(t)
	ctx := context.Background()
	first := f.startRun(t, "acme", time.Minute)
	if first.Status != ledger.RunRunning {
		t.Fatalf("first run is %s, want running", first.Status)
	}
	second := f.startRun(t, "acme", time.Minute)
	if second.Status != ledger.RunYielded || second.FinishedAt == nil || second.Error == nil {
		t.Fatalf("second run = %+v, want yielded and finished with the holder named", second)
	}
	if other := f.startRun(t, "globex", time.Minute); other.Status != ledger.RunRunning {
		t.Fatalf("another provider's run is %s, want running", other.Status)
	}
	if _, err := f.store.FinishStatementRun(ctx, first, ledger.RunComplete, 1, "", true); err != nil {
		t.Fatal(err)
	}
	if third := f.startRun(t, "acme", time.Minute); third.Status != ledger.RunRunning {
		t.Fatalf("a run after the first ended is %s, want running", third.Status)
	}
}

// A run whose process died holds the provider only until its lease
// expires: the next run takes the provider over and the dead run is
// recorded failed; the dead run can no longer renew or finish.
func TestExpiredStatementLeaseIsTakenOverAndTheDeadRunFailed(t *testing.T) {
	t.Parallel()
	f := setup(t)
	ctx := context.Background()
	dead := f.startRun(t, "acme", time.Millisecond)
	if dead.Status != ledger.RunRunning {
		t.Fatalf("run is %s", dead.Status)
	}
	// A process whose clock is a second on: the lease has expired there.
	later := ledger.New(f.pool, ledger.Config{Now: func() time.Time { return time.Now().Add(time.Second) }})
	now := later.Now()
	next, err := later.StartStatementRun(ctx, ledger.NewStatementRun{
		Tenant: f.tenant, Provider: "acme", Since: now.Add(-time.Hour), Until: now, Actor: "test", Lease: time.Minute,
	})
	if err != nil {
		t.Fatal(err)
	}
	if next.Status != ledger.RunRunning {
		t.Fatalf("run after the lease expired is %s, want running", next.Status)
	}
	if err := f.store.RenewStatementLease(ctx, dead, time.Minute); !errors.Is(err, ledger.ErrLeaseLost) {
		t.Fatalf("the dead run renews: %v, want ErrLeaseLost", err)
	}
	if _, err := f.store.FinishStatementRun(ctx, dead, ledger.RunComplete, 3, "", true); !errors.Is(err, ledger.ErrLeaseLost) {
		t.Fatalf("the dead run finishes: %v, want ErrLeaseLost", err)
	}
	runs, err := f.store.StatementRuns(ctx, ledger.WholeTenant(f.tenant), nil, 10)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range runs {
		if r.ID == dead.ID && (r.Status != ledger.RunFailed || r.Error == nil) {
			t.Fatalf("dead run = %+v, want failed with a reason", r)
		}
	}
}

// A run's counts: a duplicate counts once per operation, and its first
// record (judged before the second was read) counts as the duplicate,
// not as matched; matched and foreign rows are not kept.
func TestStatementRunCountsDuplicatesOncePerOperation(t *testing.T) {
	t.Parallel()
	f := setup(t)
	ctx := context.Background()
	run := f.startRun(t, "acme", time.Minute)
	twice, once := uuid.New(), uuid.New()
	recs := []ledger.StatementRecord{
		{Seq: 1, Finding: ledger.FindingMatched, OperationID: &twice},
		{Seq: 2, Finding: ledger.FindingMatched, OperationID: &once},
		{Seq: 3, Finding: ledger.FindingForeign},
		{Seq: 4, Finding: ledger.FindingDuplicate, OperationID: &twice},
		{Seq: 5, Finding: ledger.FindingDuplicate, OperationID: &twice},
	}
	if err := f.store.AddStatementRecords(ctx, run.ID, recs); err != nil {
		t.Fatal(err)
	}
	done, err := f.store.FinishStatementRun(ctx, run, ledger.RunComplete, 2, "", true)
	if err != nil {
		t.Fatal(err)
	}
	want := map[ledger.Finding]int64{ledger.FindingMatched: 1, ledger.FindingForeign: 1, ledger.FindingDuplicate: 1}
	for _, f := range ledger.Findings {
		if done.Findings[f] != want[f] {
			t.Errorf("findings[%s] = %d, want %d (all: %v)", f, done.Findings[f], want[f], done.Findings)
		}
	}
	kept, err := f.store.StatementFindings(ctx, run.ID, 0, 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(kept) != 3 {
		t.Fatalf("kept %d rows, want the 3 duplicate records", len(kept))
	}
}

// The missing of a run are the provider's successes in the span that no
// record of the run names: not another provider's, not one outside the
// span, not one a record named.
func TestUnlistedSuccessesAreThoseNoRecordNames(t *testing.T) {
	t.Parallel()
	f := setup(t)
	ctx := context.Background()
	listed := f.succeeded(t, "acme", "ord-1")
	unlisted := f.succeeded(t, "acme", "ord-2")
	f.succeeded(t, "globex", "ord-3")
	run := f.startRun(t, "acme", time.Minute)
	if err := f.store.AddStatementRecords(ctx, run.ID, []ledger.StatementRecord{
		{Seq: 1, Finding: ledger.FindingMatched, OperationID: &listed.ID},
	}); err != nil {
		t.Fatal(err)
	}
	now := f.store.Now()
	got, err := f.store.UnlistedSuccesses(ctx, run, now.Add(-time.Hour), now.Add(time.Second), nil, 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[0].ID != unlisted.ID {
		t.Fatalf("unlisted = %v, want only %s", operationIDs(got), unlisted.ID)
	}
	before, err := f.store.UnlistedSuccesses(ctx, run, now.Add(-2*time.Hour), now.Add(-time.Hour), nil, 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(before) != 0 {
		t.Fatalf("a span before the successes holds %v", operationIDs(before))
	}
}

func operationIDs(ops []ledger.Operation) []uuid.UUID {
	out := make([]uuid.UUID, len(ops))
	for i, op := range ops {
		out[i] = op.ID
	}
	return out
}
