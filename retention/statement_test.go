package retention_test

import (
	"context"
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/actledger/actledger/auth"
	"github.com/actledger/actledger/internal/testpipeline"
	"github.com/actledger/actledger/ledger"
)

// statementRun records a finished run of provider's statement ago before
// now, through the ledger's own writes (on the pipeline's clock, moved
// back and forth), with two findings kept as its records.
func statementRun(t *testing.T, p *testpipeline.Pipeline, provider string, ago time.Duration) ledger.StatementRun {
	t.Helper()
	ctx := context.Background()
	p.Clock.Advance(-ago)
	defer p.Clock.Advance(ago)
	now := p.Clock.Now()
	run, err := p.Store.StartStatementRun(ctx, ledger.NewStatementRun{
		Tenant: p.TenantID, Provider: provider, Since: now.Add(-time.Hour), Until: now.Add(-time.Minute),
		Actor: "schedule", Lease: time.Minute,
	})
	if err != nil || run.Status != ledger.RunRunning {
		t.Fatalf("start a run of %s: %v %+v", provider, err, run)
	}
	ref, other := ledger.ExternalKeyOfID(uuid.New()), "no reference of ours"
	if err := p.Store.AddStatementRecords(ctx, run.ID, []ledger.StatementRecord{
		{Seq: 1, Finding: ledger.FindingUnexplained, Reference: &ref},
		{Seq: 2, Finding: ledger.FindingSkipped, Reference: &other, Skip: &other},
	}); err != nil {
		t.Fatal(err)
	}
	done, err := p.Store.FinishStatementRun(ctx, run, ledger.RunComplete, 1, "", true)
	if err != nil {
		t.Fatal(err)
	}
	return done
}

// Statement runs are history like any other: a prune deletes the runs
// that ended before the retention period with their records, and the
// records of runs a week old (the run itself, its window and counts,
// stays until the period ends), and never a provider's last finished run,
// however old, which GET /v1/reconciliations, the console and /metrics
// still show with its findings. A dry run counts the same and deletes
// nothing; a second prune finds nothing more.
func TestPruneDeletesOldStatementRunsAndRecordsButEachProvidersLastRun(t *testing.T) {
	t.Parallel()
	p := testpipeline.New(t, testpipeline.Options{})
	day := 24 * time.Hour
	old := statementRun(t, p, "acme", 100*day)     // goes, with its records
	lastWeek := statementRun(t, p, "acme", 10*day) // stays, its records go
	yesterday := statementRun(t, p, "acme", day)   // stays whole: acme's last
	onlyOne := statementRun(t, p, "beta", 100*day) // stays whole: beta's last
	ctx := context.Background()

	records := func(run ledger.StatementRun) int {
		recs, err := p.Store.StatementFindings(ctx, run.ID, 0, 100)
		if err != nil {
			t.Fatal(err)
		}
		return len(recs)
	}
	listed := func() []uuid.UUID {
		status, out := p.Do(http.MethodGet, "/v1/reconciliations", p.TokenFor(p.Tenant, auth.RoleOperator), "")
		if status != http.StatusOK {
			t.Fatalf("GET /v1/reconciliations = %d %v", status, out)
		}
		var ids []uuid.UUID
		for _, r := range out["reconciliations"].([]any) {
			ids = append(ids, uuid.MustParse(r.(map[string]any)["id"].(string)))
		}
		slices.SortFunc(ids, func(a, b uuid.UUID) int { return slices.Compare(a[:], b[:]) })
		return ids
	}
	sorted := func(ids ...uuid.UUID) []uuid.UUID {
		slices.SortFunc(ids, func(a, b uuid.UUID) int { return slices.Compare(a[:], b[:]) })
		return ids
	}
	all := sorted(old.ID, lastWeek.ID, yesterday.ID, onlyOne.ID)

	dry, err := pruner(t, p, t.TempDir(), 0).Run(ctx, true)
	if err != nil {
		t.Fatal(err)
	}
	if dry.StatementRuns != 1 || dry.StatementRecords != 4 {
		t.Fatalf("dry run would prune %d runs and %d records, want 1 and 4", dry.StatementRuns, dry.StatementRecords)
	}
	if got := listed(); !slices.Equal(got, all) || records(old) != 2 || records(lastWeek) != 2 {
		t.Fatalf("a dry run deleted: runs listed %v, want %v", got, all)
	}

	// A batch of one run, so that the records and the runs are each
	// deleted over more than one batch.
	s, err := pruner(t, p, t.TempDir(), 1).Run(ctx, false)
	if err != nil {
		t.Fatal(err)
	}
	if s.StatementRuns != 1 || s.StatementRecords != 4 {
		t.Fatalf("pruned %d runs and %d records, want 1 and 4", s.StatementRuns, s.StatementRecords)
	}
	if got, want := listed(), sorted(lastWeek.ID, yesterday.ID, onlyOne.ID); !slices.Equal(got, want) {
		t.Fatalf("runs listed after the prune %v, want %v", got, want)
	}
	for _, c := range []struct {
		name string
		run  ledger.StatementRun
		want int
	}{{"old", old, 0}, {"last week's", lastWeek, 0}, {"acme's last", yesterday, 2}, {"beta's only", onlyOne, 2}} {
		if got := records(c.run); got != c.want {
			t.Errorf("the %s run keeps %d records, want %d", c.name, got, c.want)
		}
	}
	last, err := p.Store.LastStatementRuns(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	var lastIDs []uuid.UUID
	for _, r := range last {
		lastIDs = append(lastIDs, r.ID)
	}
	if got, want := sorted(lastIDs...), sorted(yesterday.ID, onlyOne.ID); !slices.Equal(got, want) {
		t.Errorf("last runs %v, want acme's newest and beta's only one %v", got, want)
	}

	again, err := pruner(t, p, t.TempDir(), 0).Run(ctx, false)
	if err != nil {
		t.Fatal(err)
	}
	if again.StatementRuns != 0 || again.StatementRecords != 0 {
		t.Errorf("a second prune deleted %d runs and %d records, want none", again.StatementRuns, again.StatementRecords)
	}
}
