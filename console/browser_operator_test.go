package console_test

import (
	"context"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/actledger/actledger/ledger"
)

// TestBrowserOperatorRetriesSeveralAndWorksTheStopButton drives a real
// headless chromium signed in as an operator: the review queue shows each
// item's reason, age, owner, deadline, confirmed facts and whether a retry
// is allowed; two selected items are retried at once; the dispatch page
// pauses a provider and resumes it.
func TestBrowserOperatorRetriesSeveralAndWorksTheStopButton(t *testing.T) {
	t.Parallel()
	p := setup(t)
	ctx := browser(t)
	a := inReview(t, p, "po-8001", ledger.ReasonRetriesExhausted, "ops-eu")
	b := inReview(t, p, "po-8002", ledger.ReasonRetriesExhausted, "ops-eu")
	c := inReview(t, p, "po-8003", ledger.ReasonRetriesExhausted, "ops-us")

	signInWith(t, ctx, p, p.Operator, "/console/review", "table.queue")
	queue := text(t, ctx, "table.queue")
	for _, want := range []string{"Reason", "Age", "Owner", "Deadline", "Confirmed facts", "Retry allowed",
		"retries_exhausted", "ops-eu", "ops-us", "po-8001", "external_key", a.ExternalKey, "yes"} {
		if !strings.Contains(queue, want) {
			t.Errorf("the review queue does not show %q:\n%s", want, queue)
		}
	}
	step(t, ctx, "select two and retry them",
		chromedp.Click(chromedp.CSS(`input[value="op:`+a.ID.String()+`"]`)),
		chromedp.Click(chromedp.CSS(`input[value="op:`+b.ID.String()+`"]`)),
		chromedp.Click(chromedp.CSS(`input[value="retry"]`)),
		chromedp.SendKeys(chromedp.CSS(`fieldset.act input[name="note"]`), "supplier fixed its outage"),
		chromedp.Click(chromedp.CSS("fieldset.act button")),
		chromedp.WaitVisible(chromedp.CSS("table.results")),
	)
	if got := text(t, ctx, "main"); !strings.Contains(got, "2 of 2 item(s) done") || strings.Count(got, "done: now queued") != 2 {
		t.Fatalf("the results page says:\n%s", got)
	}
	for _, op := range []ledger.Operation{a, b} {
		if got := p.Get(op); got.Status != ledger.StatusQueued {
			t.Errorf("%s is %s after retry, want queued", op.Key, got.Status)
		}
	}
	if got := p.Get(c); got.Status != ledger.StatusReview {
		t.Errorf("the item not selected is %s, want still review", got.Status)
	}

	step(t, ctx, "pause acme",
		chromedp.Navigate(p.API.URL+"/console/dispatch"),
		chromedp.WaitVisible(chromedp.CSS(`form[action="/console/dispatch/pause"]`)),
		chromedp.SetValue(chromedp.CSS(`form[action="/console/dispatch/pause"] select[name="provider"]`), "acme"),
		chromedp.Click(chromedp.CSS("button.pause")),
		chromedp.WaitVisible(chromedp.CSS("p.notice")),
	)
	if got := text(t, ctx, "main"); !strings.Contains(got, "Paused.") || !strings.Contains(got, "acme") || !strings.Contains(got, "operator:") {
		t.Errorf("after pause the dispatch page says:\n%s", got)
	}
	pauses, err := p.Store.Pauses(context.Background(), p.TenantID)
	if err != nil || len(pauses) != 1 || pauses[0].Provider != "acme" {
		t.Fatalf("pauses = %v, %v; want acme", pauses, err)
	}
	// The page before the click has a notice too: wait for the new one.
	step(t, ctx, "resume it from its row",
		chromedp.Click(chromedp.CSS(`td form[action="/console/dispatch/resume"] button`)),
		chromedp.WaitNotPresent(chromedp.CSS(`td form[action="/console/dispatch/resume"]`)),
		chromedp.WaitVisible(chromedp.CSS("p.notice")),
	)
	if got := text(t, ctx, "main"); !strings.Contains(got, "1 pause(s) removed") || !strings.Contains(got, "Nothing is paused") {
		t.Errorf("after resume the dispatch page says:\n%s", got)
	}
	if pauses, err := p.Store.Pauses(context.Background(), p.TenantID); err != nil || len(pauses) != 0 {
		t.Errorf("pauses after resume = %v, %v; want none", pauses, err)
	}
}
