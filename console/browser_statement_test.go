package console_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/google/uuid"

	"github.com/actledger/actledger/auth"
	"github.com/actledger/actledger/internal/mocksupplier"
	"github.com/actledger/actledger/internal/testpipeline"
	"github.com/actledger/actledger/ledger"
)

// TestBrowserDispatchShowsTheLastStatementRunAndLinksItsFindings drives a
// real headless chromium signed in as an operator after a reconciliation
// that found a match, a mismatch, a missing order and an unexplained one:
// the dispatch page shows acme's last run (complete, its pages, each
// finding's count), and each count that needs a person links to the
// review queue's items of that finding and no others.
func TestBrowserDispatchShowsTheLastStatementRunAndLinksItsFindings(t *testing.T) {
	t.Parallel()
	p := testpipeline.New(t, testpipeline.Options{LookupLag: -1, Mode: mocksupplier.Ignore, ProviderExtra: testpipeline.ReconcileSection})
	ctx := browser(t)
	p.Start(1)
	var ops []ledger.Operation
	for i, sku := range []string{"A-1", "B-2", "C-3"} {
		ops = append(ops, p.Enqueue(fmt.Sprintf("po-91%d", i), fmt.Sprintf(`{"sku":%q}`, sku)))
	}
	for i, op := range ops {
		ops[i] = p.WaitStatus(op, ledger.StatusSucceeded, 15*time.Second)
	}
	mismatched, missing := ops[0], ops[1]
	if err := p.Supplier.SetOrderParams(*mismatched.ProviderReference, json.RawMessage(`{"sku":"Z-9"}`)); err != nil {
		t.Fatal(err)
	}
	if err := p.Supplier.RemoveOrder(*missing.ProviderReference); err != nil {
		t.Fatal(err)
	}
	stranger := ledger.ExternalKeyOfID(uuid.New())
	p.Supplier.SeedOrder(mocksupplier.Seed{ClientReference: stranger, Params: json.RawMessage(`{"sku":"X"}`)})
	p.Clock.Advance(2 * time.Second)
	body := fmt.Sprintf(`{"provider":"acme","since":%q,"until":%q}`, p.Clock.Now().Add(-time.Hour).UTC().Format(time.RFC3339Nano),
		p.Clock.Now().Add(-time.Millisecond).UTC().Format(time.RFC3339Nano))
	status, out := p.Do(http.MethodPost, "/v1/reconciliations", p.TokenFor(p.Tenant, auth.RoleOperator), body)
	if status != http.StatusOK {
		t.Fatalf("POST /v1/reconciliations = %d %v", status, out)
	}
	run := out["reconciliation"].(map[string]any)

	signInWith(t, ctx, p, p.Operator, "/console/dispatch", "#statements")
	section := text(t, ctx, "#statements")
	for _, want := range []string{"Statement reconciliation", "acme", "complete", fmt.Sprintf("%v", run["pages"]),
		"matched 1", "settles 0", "mismatch 1", "duplicate 0", "missing 1", "unexplained 1", "foreign 0", "skipped 0"} {
		if !strings.Contains(section, want) {
			t.Errorf("the statement section does not show %q:\n%s", want, section)
		}
	}
	// Only the counts that opened review items are links.
	c, cancel := context.WithTimeout(ctx, 30*time.Second)
	links, err := chromedp.Run(c, chromedp.Evaluate[[]string](
		`Array.from(document.querySelectorAll('#statements td a')).map(a => a.textContent + ' ' + a.getAttribute('href'))`))
	cancel()
	if err != nil {
		t.Fatalf("read the findings' links: %v", err)
	}
	want := []string{
		"mismatch 1 /console/review?reason=effect_mismatch", "missing 1 /console/review?reason=effect_missing",
		"unexplained 1 /console/review?reason=unmatched_evidence",
	}
	if strings.Join(links, "\n") != strings.Join(want, "\n") {
		t.Fatalf("the findings link\n  %s\nwant\n  %s", strings.Join(links, "\n  "), strings.Join(want, "\n  "))
	}

	for _, c := range []struct {
		finding   string
		shows     string
		notShowns []string
	}{
		{"mismatch 1", mismatched.Key, []string{missing.Key, stranger}},
		{"missing 1", missing.Key, []string{mismatched.Key, stranger}},
		{"unexplained 1", stranger, []string{mismatched.Key, missing.Key}},
	} {
		step(t, ctx, "follow "+c.finding,
			chromedp.Navigate(p.API.URL+"/console/dispatch"),
			chromedp.WaitVisible(chromedp.CSS("#statements")),
			chromedp.Click(fmt.Sprintf(`//section[@id="statements"]//a[strong[normalize-space()=%q]]`, c.finding)),
			chromedp.WaitVisible(chromedp.CSS("table.queue")),
		)
		queue := text(t, ctx, "table.queue")
		if !strings.Contains(queue, c.shows) {
			t.Errorf("%s leads to a queue without %s:\n%s", c.finding, c.shows, queue)
		}
		for _, other := range c.notShowns {
			if strings.Contains(queue, other) {
				t.Errorf("%s leads to a queue that also shows %s:\n%s", c.finding, other, queue)
			}
		}
	}
}
