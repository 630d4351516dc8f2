package recipes_test

import (
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/actledger/actledger/internal/testpipeline"
	"github.com/actledger/actledger/ledger"
	"github.com/actledger/actledger/statement"
)

// statementPipeline runs r's page unchanged against f, started, once its
// schedule's first run (whose window ends the file's lag ago, before
// anything the test makes) is over, so that a run the test asks for is
// never the one that yields.
func statementPipeline(t *testing.T, r recipe, f *fake, clock *testpipeline.Clock) *testpipeline.Pipeline {
	t.Helper()
	p := testpipeline.New(t, testpipeline.Options{
		ProvidersFile: providersFile(t, r.page), BaseURLs: map[string]string{r.provider: f.url},
		Tenant: "acme-corp", Env: r.env, Clock: clock, Lease: time.Minute,
	})
	p.Start(1)
	if rep := p.StatementSchedule.TestSignals.Ran.WaitOrTimeout(); rep.Run.Provider == "" {
		t.Fatal("the schedule's first run did not happen")
	}
	return p
}

// reconcileLastHour moves the clock on by wait (past what the supplier
// leaves out of a list as too recent) and runs provider's statement over
// the hour before, through the runner serve runs; it fails unless the
// run read its whole window.
func reconcileLastHour(t *testing.T, p *testpipeline.Pipeline, provider string, wait time.Duration) statement.Report {
	t.Helper()
	p.Clock.Advance(wait)
	now := p.Clock.Now()
	rep, err := p.Statements.Run(t.Context(), provider, statement.Options{Since: now.Add(-time.Hour), Until: now, Actor: "operator:recipe-test"})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Run.Status != ledger.RunComplete {
		t.Fatalf("run %s (%s), want complete", rep.Run.Status, deref(rep.Run.Error))
	}
	return rep
}

// wantFindings checks a run's counts against want (findings not named
// are zero).
func wantFindings(t *testing.T, rep statement.Report, want map[ledger.Finding]int64) {
	t.Helper()
	got := map[ledger.Finding]int64{}
	for f, n := range rep.Run.Findings {
		if n != 0 {
			got[f] = n
		}
	}
	if !maps.Equal(got, want) {
		t.Fatalf("findings %v, want %v; attention:\n%s", got, want, attention(rep))
	}
}

// attention lists what a run left for a person, one line a record.
func attention(rep statement.Report) string {
	var b strings.Builder
	for _, r := range rep.Attention {
		b.WriteString(string(r.Finding) + " " + deref(r.Reference) + " " + deref(r.ProviderReference) + " " + deref(r.Skip) + "\n")
	}
	return b.String()
}

// unexplained are the references of the run's unexplained records.
func unexplained(rep statement.Report) []string {
	var refs []string
	for _, r := range rep.Attention {
		if r.Finding == ledger.FindingUnexplained {
			refs = append(refs, deref(r.Reference))
		}
	}
	slices.Sort(refs)
	return refs
}

// settledByTheStatement checks that op, whose answer was lost, is
// succeeded with reference by the run (event reconciled), and
// that the supplier holds exactly one effect for it.
func settledByTheStatement(t *testing.T, p *testpipeline.Pipeline, f *fake, op ledger.Operation, reference string) {
	t.Helper()
	done := p.Get(op)
	if done.Status != ledger.StatusSucceeded || done.ProviderReference == nil || *done.ProviderReference != reference {
		t.Fatalf("the lost operation is %s with reference %v, want succeeded with %s; history:\n%s", done.Status, done.ProviderReference, reference, p.History(op))
	}
	// A resend under the key that was in flight meanwhile may end after
	// it, as a stale result of a fenced claim: it changes nothing.
	if kinds := p.Kinds(op); !slices.Contains(kinds, string(ledger.EventReconciled)) {
		t.Fatalf("events %v: want the statement's reconciled among them; history:\n%s", kinds, p.History(op))
	}
	if n := f.effects(op.ExternalKey); n != 1 {
		t.Fatalf("the supplier holds %d effects for the settled operation, want 1", n)
	}
}

// refusedOnce waits until op, whose answer was lost, has had its resend
// refused before any effect (a rate limit): it then waits, unknown, for
// the refusal's Retry-After.
func refusedOnce(t *testing.T, p *testpipeline.Pipeline, op ledger.Operation) {
	t.Helper()
	p.Eventually(settle, "the resend to be refused", func() bool {
		attempts := 0
		for _, k := range p.Kinds(op) {
			if k == string(ledger.EventAttempt) {
				attempts++
			}
		}
		return attempts >= 2 && p.Get(op).Status == ledger.StatusUnknown
	})
}

// stranger is an external key no operation holds, as a record made by
// hand under a copied reference carries.
func stranger() string { return ledger.ExternalKeyOfID(uuid.New()) }

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}
