package statement_test

import (
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/actledger/actledger/internal/mocksupplier"
	"github.com/actledger/actledger/internal/testpipeline"
	"github.com/actledger/actledger/internal/testreceiver"
	"github.com/actledger/actledger/ledger"
	"github.com/actledger/actledger/notify"
)

// scheduledSection is testpipeline.ReconcileSection run every hour over the last two:
// the schedule's first run, at the start, reads nothing yet, and the next
// one, due after the clock moves an hour, reads every order the test made.
var scheduledSection = strings.Replace(testpipeline.ReconcileSection, "      window: 1h\n", "      window: 2h\n      every: 1h\n", 1)

// notificationsSettled waits for the pipeline's notifications to be
// delivered and acknowledged (testpipeline.Pipeline.NotificationsSettled).
func notificationsSettled(t *testing.T, p *testpipeline.Pipeline) {
	t.Helper()
	p.NotificationsSettled(20 * time.Second)
}

// The review items a scheduled statement run opens are announced as any
// other: a receiver of review.opened is sent, signed, one event for each
// operation the run sent to a person (a mismatch, a duplicate, a missing
// order) and one for the unexplained order's evidence, each naming what it
// is about; the next run, which finds the same, opens nothing and sends
// nothing more.
func TestStatementFindingsAnnounceTheirReviewItemsToReceiversOnce(t *testing.T) {
	t.Parallel()
	secret := testreceiver.Secret(t)
	rc := testreceiver.New(t, nil)
	p := testpipeline.New(t, testpipeline.Options{
		LookupLag: -1, Mode: mocksupplier.Ignore, ProviderExtra: scheduledSection,
		Env: map[string]string{"NOTIFY_SECRET": secret},
		Notifications: fmt.Sprintf("  ops:\n    url: %s\n    secret_env: NOTIFY_SECRET\n    tenant: %q\n    events: [review.opened]\n",
			rc.URL, "Acme Corp."),
		Notify: notify.Config{ConsoleURL: "https://actledger.acme.example/console", BackoffInitial: 50 * time.Millisecond,
			BackoffMax: 200 * time.Millisecond, Timeout: 2 * time.Second},
	})
	p.Start(1)
	if first := p.StatementSchedule.TestSignals.Ran.WaitOrTimeout(); first.Run.Status != ledger.RunComplete {
		t.Fatalf("the schedule's first run: %+v", first.Run)
	}
	ops := succeed(t, p, "A-1", "B-2", "C-3", "D-4")
	mismatched, duplicated, missing := ops[0], ops[1], ops[2]
	if err := p.Supplier.SetOrderParams(*mismatched.ProviderReference, json.RawMessage(`{"sku":"Z-9"}`)); err != nil {
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

	p.Clock.Advance(time.Hour)
	rep := p.StatementSchedule.TestSignals.Ran.WaitOrTimeout()
	want := map[string]int{"matched": 1, "mismatch": 1, "duplicate": 1, "missing": 1, "unexplained": 1}
	if got := counts(rep.Run); rep.Run.Status != ledger.RunComplete || rep.Run.Actor != "schedule" || !sameCounts(got, want) {
		t.Fatalf("scheduled run %s by %s found %v, want complete by the schedule with %v", rep.Run.Status, rep.Run.Actor, got, want)
	}
	p.Eventually(10*time.Second, "four review.opened deliveries", func() bool { return len(rc.Distinct()) >= 4 })
	notificationsSettled(t, p)

	heard := func() []string {
		var out []string
		for _, d := range rc.Distinct() {
			testreceiver.Verify(t, secret, d)
			e := d.Event(t)
			what := "another operation"
			switch e.Data["operation_id"] {
			case mismatched.ID.String():
				what = "mismatched"
			case duplicated.ID.String():
				what = "duplicated"
			case missing.ID.String():
				what = "missing"
			case nil:
				what = "evidence"
			}
			out = append(out, fmt.Sprintf("%s %s %v", e.Type, what, e.Data["status"]))
		}
		sort.Strings(out)
		return out
	}
	wantHeard := []string{"review.opened duplicated review", "review.opened evidence review", "review.opened mismatched review", "review.opened missing review"}
	if got := heard(); !slices.Equal(got, wantHeard) {
		t.Fatalf("the receiver heard\n  %s\nwant\n  %s", strings.Join(got, "\n  "), strings.Join(wantHeard, "\n  "))
	}
	if n := len(rc.Deliveries()); n != 4 {
		t.Errorf("the receiver was sent %d requests, want 4 (one per item, none repeated)", n)
	}

	p.Clock.Advance(time.Hour)
	again := p.StatementSchedule.TestSignals.Ran.WaitOrTimeout()
	if got := counts(again.Run); again.Run.Status != ledger.RunComplete || got["mismatch"] != 1 || got["duplicate"] != 1 || got["unexplained"] != 1 {
		t.Fatalf("the next run %s found %v, want the same records again", again.Run.Status, got)
	}
	notificationsSettled(t, p)
	if got := heard(); !slices.Equal(got, wantHeard) || len(rc.Deliveries()) != 4 {
		t.Fatalf("after the next run the receiver heard %d requests:\n  %s\nwant the same 4", len(rc.Deliveries()), strings.Join(got, "\n  "))
	}
}

// counts is a run's non-zero findings.
func counts(run ledger.StatementRun) map[string]int {
	out := map[string]int{}
	for f, n := range run.Findings {
		if n != 0 {
			out[string(f)] = int(n)
		}
	}
	return out
}
