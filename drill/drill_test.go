package drill_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http/httptest"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/actledger/actledger/drill"
	"github.com/actledger/actledger/internal/mocksupplier"
	"github.com/actledger/actledger/internal/testdb"
	"github.com/actledger/actledger/provider"
)

// demoLag is the demo supplier's lookup lag in these tests, and what its providers file declares
// as visibility_lag: the file's contract matches the supplier's behaviour.
const demoLag = 500 * time.Millisecond

// demoFile is demo/providers.yaml, the file `make run` serves, pointed at url, with its lag
// shortened to demoLag; edit changes it further.
func demoFile(t *testing.T, url string, edit ...func(string) string) *provider.Registry {
	t.Helper()
	raw, err := os.ReadFile("../demo/providers.yaml")
	if err != nil {
		t.Fatal(err)
	}
	text := strings.Replace(string(raw), "http://127.0.0.1:9100", url, 1)
	text = strings.Replace(text, "visibility_lag: 2s", "visibility_lag: "+demoLag.String(), 1)
	// The demo supplier lists every order at once; its file's reconcile.lag is a scheduling
	// margin, which would make each count wait a minute.
	text = strings.Replace(text, "      lag: 1m", "      lag: "+demoLag.String(), 1)
	for _, e := range edit {
		text = e(text)
	}
	reg, err := provider.ParseEnv([]byte(text), func(string) string { return "whsec_drill" })
	if err != nil {
		t.Fatalf("providers file: %v", err)
	}
	return reg
}

// demoSupplier serves the demo supplier on a loopback port.
func demoSupplier(t *testing.T, mode mocksupplier.Mode) (*mocksupplier.Server, string) {
	t.Helper()
	s := mocksupplier.New(mocksupplier.Config{Idempotency: mode, LookupLag: demoLag})
	srv := httptest.NewServer(s)
	t.Cleanup(func() { srv.Close(); s.Close() })
	return s, srv.URL
}

// run runs a drill on a fresh database of the test's own.
func run(t *testing.T, opts drill.Options) (*drill.Report, string) {
	t.Helper()
	_, url := testdb.NewWithURL(t)
	opts.DatabaseURL = url
	if opts.Action == "" {
		opts.Action = "supplier.create_order"
	}
	if opts.Params == nil {
		opts.Params = json.RawMessage(`{"sku":"A-1","qty":3}`)
	}
	var progress bytes.Buffer
	opts.Progress = &progress
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	start := time.Now()
	report, err := drill.Run(ctx, opts)
	t.Logf("drill took %s; progress:\n%s", time.Since(start).Round(100*time.Millisecond), progress.String())
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	var md strings.Builder
	if err := report.WriteMarkdown(&md); err != nil {
		t.Fatal(err)
	}
	return report, md.String()
}

func TestDrillPassesEveryScenarioAgainstTheDemoSupplierCountingItsOrders(t *testing.T) {
	t.Parallel()
	supplier, url := demoSupplier(t, mocksupplier.Honour)
	report, md := run(t, drill.Options{Registry: demoFile(t, url)})
	t.Log(md)
	if !report.Passed {
		t.Errorf("report did not pass:\n%s", md)
	}
	if got, want := len(report.Scenarios), len(drill.Scenarios); got != want {
		t.Errorf("%d scenarios ran, want %d", got, want)
	}
	for _, s := range report.Scenarios {
		if s.Passed == nil || !*s.Passed {
			t.Errorf("%s: passed %v, why %q", s.Name, s.Passed, s.Why)
		}
		if !s.AccessOK {
			t.Errorf("%s: another tenant's or scope's token saw the operation", s.Name)
		}
	}
	// The drill's counts are the supplier's: every effect it lists is an order there, once.
	perRef := map[string]int{}
	for _, e := range report.Effects {
		perRef[e.Reference]++
	}
	for ref, n := range perRef {
		if got := supplier.Orders(ref); got != n {
			t.Errorf("reference %s: the report lists %d effects, the supplier holds %d orders", ref, n, got)
		}
	}
	if got := supplier.TotalOrders(); got != len(report.Effects) {
		t.Errorf("the supplier holds %d orders, the report lists %d effects", got, len(report.Effects))
	}
}

// withoutReconcile removes the provider's reconcile section: effects are counted by its lookup.
func withoutReconcile(text string) string {
	return reconcileSection.ReplaceAllString(text, "")
}

var reconcileSection = regexp.MustCompile(`(?s)\n    reconcile:.*?\n      lag: [^\n]+`)

// withoutLine removes the line that starts (after its indentation) with prefix.
func withoutLine(prefix string) func(string) string {
	return func(text string) string {
		return regexp.MustCompile(`(?m)^\s*`+regexp.QuoteMeta(prefix)+`.*\n`).ReplaceAllString(text, "")
	}
}

func scenario(t *testing.T, r *drill.Report, name string) drill.Scenario {
	t.Helper()
	for _, s := range r.Scenarios {
		if s.Name == name {
			return s
		}
	}
	t.Fatalf("no scenario %s in the report", name)
	return drill.Scenario{}
}

func TestDrillFailsASupplierThatIgnoresItsIdempotencyHeaderWithTwoEffectsAndSaysWhy(t *testing.T) {
	t.Parallel()
	supplier, url := demoSupplier(t, mocksupplier.Ignore)
	report, md := run(t, drill.Options{Registry: demoFile(t, url), Only: []string{drill.LostResponse, drill.ErrorAfterCommit}})
	if report.Passed {
		t.Fatalf("the drill passed a supplier that ignores Idempotency-Key:\n%s", md)
	}
	for _, name := range []string{drill.LostResponse, drill.ErrorAfterCommit} {
		s := scenario(t, report, name)
		if s.Passed == nil || *s.Passed {
			t.Errorf("%s: passed %v, want false", name, s.Passed)
		}
		if s.Effects == nil || *s.Effects != 2 {
			t.Errorf("%s: effects %v, want 2", name, s.Effects)
		}
		for _, want := range []string{"2 effects", "does not honour the header", "Idempotency-Key"} {
			if !strings.Contains(s.Why, want) {
				t.Errorf("%s: why %q does not say %q", name, s.Why, want)
			}
		}
	}
	for _, e := range report.Effects {
		if got := supplier.Orders(e.Reference); got != 2 {
			t.Errorf("reference %s: the supplier holds %d orders, the report counted 2", e.Reference, got)
		}
	}
	for _, want := range []string{"**FAILED**: 2 of 2 scenarios failed", "## lost_response: FAILED", "**Why**: the supplier holds 2 effects"} {
		if !strings.Contains(md, want) {
			t.Errorf("the Markdown does not say %q:\n%s", want, md)
		}
	}
}

func TestDrillWithNoKeyLookupOrStatementIsNotEstablishedAndNamesTheReferences(t *testing.T) {
	t.Parallel()
	_, url := demoSupplier(t, mocksupplier.Honour)
	reg := demoFile(t, url, withoutReconcile, withoutLine("idempotency:"), withoutLine("lookup:"))
	report, md := run(t, drill.Options{Registry: reg, Only: []string{drill.LostResponse, drill.ChangedParams}})
	if report.Passed {
		t.Fatalf("the drill passed without evidence:\n%s", md)
	}
	for _, s := range report.Scenarios {
		if s.Passed != nil {
			t.Errorf("%s: passed %v, want null (not established); why %q", s.Name, *s.Passed, s.Why)
		}
		if s.Effects != nil {
			t.Errorf("%s: effects %d, want null", s.Name, *s.Effects)
		}
		if !strings.Contains(s.Why, "could not be established") || !strings.Contains(s.Why, "al_") {
			t.Errorf("%s: why %q does not say the count could not be established and which reference to check", s.Name, s.Why)
		}
	}
	if len(report.Effects) != 2 {
		t.Fatalf("effects %+v, want one unread reference per scenario", report.Effects)
	}
	for _, e := range report.Effects {
		if e.ProviderReference != nil {
			t.Errorf("effect %+v has a provider reference the drill could not have read", e)
		}
	}
	if !strings.Contains(md, "not established") || !strings.Contains(md, "check by hand") {
		t.Errorf("the Markdown does not say what to check by hand:\n%s", md)
	}
}

func TestDrillCountsEffectsByTheLookupWhenThereIsNoStatement(t *testing.T) {
	t.Parallel()
	supplier, url := demoSupplier(t, mocksupplier.Honour)
	report, md := run(t, drill.Options{Registry: demoFile(t, url, withoutReconcile),
		Only: []string{drill.LostResponse, drill.Concurrent, drill.ExpiredApproval}})
	if !report.Passed {
		t.Fatalf("report did not pass:\n%s", md)
	}
	if !strings.Contains(md, "counted at the supplier by its lookup") {
		t.Errorf("the report does not say the lookup counted:\n%s", md)
	}
	for _, e := range report.Effects {
		if got := supplier.Orders(e.Reference); got != 1 || e.ProviderReference == nil {
			t.Errorf("effect %+v: the supplier holds %d orders", e, got)
		}
	}
}

// cancelOn cancels when a progress line contains text.
type cancelOn struct {
	text   string
	cancel context.CancelFunc
	buf    strings.Builder
}

func (c *cancelOn) Write(p []byte) (int, error) {
	c.buf.Write(p)
	if strings.Contains(c.buf.String(), c.text) {
		c.cancel()
	}
	return len(p), nil
}

func TestDrillStoppedSaysWhichScenariosDidNotFinishAndListsTheEffectsSoFar(t *testing.T) {
	t.Parallel()
	supplier, url := demoSupplier(t, mocksupplier.Honour)
	_, dbURL := testdb.NewWithURL(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	// Stopped while worker_lost waits for the lease to expire under its stalled worker.
	progress := &cancelOn{text: "the worker stalls with the answer", cancel: cancel}
	report, err := drill.Run(ctx, drill.Options{Registry: demoFile(t, url), Action: "supplier.create_order",
		Params: json.RawMessage(`{"sku":"A-1"}`), DatabaseURL: dbURL, Progress: progress,
		Only: []string{drill.LostResponse, drill.WorkerLost, drill.ChangedParams}})
	if err == nil || report == nil {
		t.Fatalf("Run: report %v, error %v; want both", report, err)
	}
	if report.Passed {
		t.Error("a stopped drill passed")
	}
	want := map[string]string{drill.LostResponse: "passed", drill.WorkerLost: "not finished", drill.ChangedParams: "not run"}
	for _, s := range report.Scenarios {
		switch {
		case want[s.Name] == "passed" && (s.Passed == nil || !*s.Passed):
			t.Errorf("%s: passed %v, why %q", s.Name, s.Passed, s.Why)
		case want[s.Name] != "passed" && (s.Passed != nil || !strings.HasPrefix(s.Why, want[s.Name])):
			t.Errorf("%s: passed %v, why %q; want %q", s.Name, s.Passed, s.Why, want[s.Name])
		}
	}
	// What was not observed is not claimed: no access check of a scenario that never ran.
	if s := scenario(t, report, drill.ChangedParams); s.AccessOK || s.State != "not run" {
		t.Errorf("changed_params, never run: access_ok %t, state %q", s.AccessOK, s.State)
	}
	// worker_lost's order exists at the supplier though nothing counted it: it is listed to check.
	if len(report.Effects) != 2 {
		t.Fatalf("effects %+v, want lost_response's and worker_lost's", report.Effects)
	}
	lost := report.Effects[1]
	if lost.Scenario != drill.WorkerLost || lost.ProviderReference != nil || supplier.Orders(lost.Reference) != 1 {
		t.Errorf("effect %+v (%d orders at the supplier), want worker_lost's, to check by hand", lost, supplier.Orders(lost.Reference))
	}
}

func TestDrillRefusesADatabaseThatHoldsOperationsAlready(t *testing.T) {
	t.Parallel()
	_, url := demoSupplier(t, mocksupplier.Honour)
	_, dbURL := testdb.NewWithURL(t)
	opts := drill.Options{Registry: demoFile(t, url), Action: "supplier.create_order", Params: json.RawMessage(`{"sku":"A-1"}`),
		DatabaseURL: dbURL, Only: []string{drill.ChangedParams}}
	if report, err := drill.Run(context.Background(), opts); err != nil || !report.Passed {
		t.Fatalf("first drill: %v, %+v", err, report)
	}
	// The ledger now holds the first drill's operations: a second drill must not run on it.
	if _, err := drill.Run(context.Background(), opts); !errors.Is(err, drill.ErrLedgerInUse) {
		t.Errorf("second drill on the same database: %v, want ErrLedgerInUse", err)
	}
}

func TestDrillCountsByTheStatementAloneAndAcceptsReviewWhereNothingCanSettle(t *testing.T) {
	t.Parallel()
	supplier, url := demoSupplier(t, mocksupplier.Honour)
	reg := demoFile(t, url, withoutLine("idempotency:"), withoutLine("lookup:"))
	report, md := run(t, drill.Options{Registry: reg, Only: []string{drill.LostResponse, drill.EmptyLookup}})
	lost := scenario(t, report, drill.LostResponse)
	// No key and no lookup: actledger cannot settle a lost answer, and hands it to a person
	// instead of sending it again; the statement shows the one order.
	if lost.Passed == nil || !*lost.Passed || lost.State != "review" || lost.Effects == nil || *lost.Effects != 1 {
		t.Errorf("lost_response: passed %v, state %s, effects %v; want passed, review, 1:\n%s", lost.Passed, lost.State, lost.Effects, md)
	}
	if len(lost.Review) != 1 || lost.Review[0] != "outcome_unknown" {
		t.Errorf("lost_response: review %v, want [outcome_unknown]", lost.Review)
	}
	if got := supplier.Orders(report.Effects[0].Reference); got != 1 {
		t.Errorf("the supplier holds %d orders, want 1", got)
	}
	if empty := scenario(t, report, drill.EmptyLookup); empty.Passed != nil || !strings.Contains(empty.Why, "no lookup") {
		t.Errorf("empty_lookup without a lookup: passed %v, why %q; want not established, saying so", empty.Passed, empty.Why)
	}
	if report.Passed {
		t.Error("a drill with a scenario not established passed")
	}
}
