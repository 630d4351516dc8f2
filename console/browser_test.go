package console_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/actledger/actledger/internal/testpipeline"
	"github.com/actledger/actledger/ledger"
)

// screenshotsEnv names the directory the browser test writes its
// screenshots to (make screenshots sets it to docs/); unset, none are
// kept.
const screenshotsEnv = "CONSOLE_SCREENSHOTS"

// chromiumPath finds Debian's chromium (CI installs it: .ci/run).
func chromiumPath() string {
	for _, name := range []string{"chromium", "chromium-browser"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	return ""
}

// browser starts a headless chromium with a fresh profile and returns a
// context whose actions drive one tab. Without chromium the test is
// skipped, loudly.
func browser(t *testing.T) context.Context {
	t.Helper()
	path := chromiumPath()
	if path == "" {
		msg := "SKIPPING THE CONSOLE BROWSER TEST: no chromium found on PATH (apt-get install -y chromium; .ci/run does)"
		fmt.Fprintln(os.Stderr, "!!!", msg)
		t.Skip(msg)
	}
	dir, err := os.MkdirTemp("", "actledger-chromium-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		// Chromium's children may still write there a moment after it
		// stops; try again for a while.
		for range 50 {
			if os.RemoveAll(dir) == nil {
				return
			}
			time.Sleep(100 * time.Millisecond)
		}
	})
	alloc, cancelAlloc := chromedp.NewExecAllocator(context.Background(),
		chromedp.ExecPath(path), chromedp.NoSandbox, chromedp.Headless, chromedp.DisableGPU, chromedp.NoFirstRun,
		chromedp.Flag("disable-background-networking", true), chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true), chromedp.Flag("no-default-browser-check", true),
		chromedp.UserDataDir(dir), chromedp.WindowSize(1360, 900),
	)
	t.Cleanup(cancelAlloc)
	ctx, cancel := chromedp.NewContext(alloc)
	t.Cleanup(cancel)
	// The first run starts the browser; it must not carry a timeout.
	if err := chromedp.Do(ctx, chromedp.Navigate("about:blank")); err != nil {
		t.Fatalf("start chromium %s: %v", path, err)
	}
	return ctx
}

// step runs actions in the tab with a bound, failing the test with what
// was being done.
func step(t *testing.T, ctx context.Context, what string, actions ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	c, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if err := chromedp.Do(c, actions...); err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

func text(t *testing.T, ctx context.Context, sel string) string {
	t.Helper()
	c, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	s, err := chromedp.Run(c, chromedp.Text(chromedp.CSS(sel)))
	if err != nil {
		t.Fatalf("read %s: %v", sel, err)
	}
	return s
}

// screenshot keeps a full-page PNG of the tab as name in $CONSOLE_SCREENSHOTS.
func screenshot(t *testing.T, ctx context.Context, name string) {
	t.Helper()
	dir := os.Getenv(screenshotsEnv)
	if dir == "" {
		return
	}
	c, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	png, err := chromedp.Run(c, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatalf("screenshot %s: %v", name, err)
	}
	if err := os.WriteFile(filepath.Join(dir, name), png, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("wrote %s", filepath.Join(dir, name))
}

// signInWith signs in with token, which lands on the overview, then
// follows the header's link to page (empty: stays) and waits for lands.
func signInWith(t *testing.T, ctx context.Context, p *testpipeline.Pipeline, token, page, lands string) {
	t.Helper()
	step(t, ctx, "sign in",
		chromedp.Navigate(p.API.URL+"/console/signin"),
		chromedp.WaitVisible(chromedp.CSS("#token")),
		chromedp.SendKeys(chromedp.CSS("#token"), token),
		chromedp.Click(chromedp.CSS("form.signin button")),
		chromedp.WaitVisible(chromedp.CSS("#overview")),
	)
	if page != "" {
		step(t, ctx, "open "+page, chromedp.Click(chromedp.CSS(`nav a[href="`+page+`"]`)))
	}
	step(t, ctx, "wait for "+lands, chromedp.WaitVisible(chromedp.CSS(lands)))
}

// TestBrowserApproveThenResolveTwo drives a real headless chromium: an
// approver lands on the overview, approves a proposal on the approval
// requests page and the supplier receives exactly one order; the approver
// finds the order by its key on the Operations page and opens its
// timeline (times to the millisecond); an operator selects two review
// items and resolves both.
func TestBrowserApproveThenResolveTwo(t *testing.T) {
	t.Parallel()
	p := setup(t)
	ctx := browser(t)
	// The review items are made before the dispatcher runs: it would
	// claim a queued operation before the test moves it to review.
	a := inReview(t, p, "po-5001", ledger.ReasonOutcomeUnknown, "ops-eu")
	b := inReview(t, p, "po-5002", ledger.ReasonRetriesExhausted, "ops-eu")
	c := inReview(t, p, "po-5003", ledger.ReasonLookupFailing, "ops-us")
	op := propose(t, p, "po-4711", `{"sku":"A-1","qty":25,"ship_to":"Lyon <warehouse 3>"}`)
	other := propose(t, p, "po-4712", `{"sku":"B-7","qty":3}`)
	p.Start(1)

	signInWith(t, ctx, p, p.Approver, "", "#overview")
	screenshot(t, ctx, "console-overview.png")
	step(t, ctx, "open the approval requests", chromedp.Click(chromedp.CSS(`nav a[href="/console/approvals"]`)),
		chromedp.WaitVisible(chromedp.CSS("#op-"+op.ID.String())))
	screenshot(t, ctx, "console-approvals.png")
	step(t, ctx, "approve",
		chromedp.Click(chromedp.CSS("#op-"+op.ID.String()+" button.approve")),
		chromedp.WaitVisible(chromedp.CSS("p.notice")),
	)
	if got := text(t, ctx, "p.notice"); !strings.Contains(got, "Approved "+op.ID.String()) {
		t.Fatalf("after approve the page says %q", got)
	}
	done := p.WaitStatus(op, ledger.StatusSucceeded, 30*time.Second)
	if n := p.Orders(done); n != 1 {
		t.Fatalf("the supplier holds %d orders for %s, want exactly 1", n, op.Key)
	}

	// The approver finds the order again by its key on the Operations
	// page and opens its timeline from the row.
	step(t, ctx, "find po-4711 on the Operations page",
		chromedp.Click(chromedp.CSS(`nav a[href="/console/operations"]`)),
		chromedp.WaitVisible(chromedp.CSS("#operations-filter")),
		chromedp.SendKeys(chromedp.CSS(`#operations-filter input[name="key"]`), "po-4711"),
		chromedp.Click(chromedp.CSS("#operations-filter button")),
		// The unfiltered page lists the row too: the filtered one is
		// there once the other proposal's row is gone.
		chromedp.WaitNotPresent(chromedp.CSS("#row-"+other.ID.String())),
		chromedp.WaitVisible(chromedp.CSS("#row-"+op.ID.String())),
	)
	if got := text(t, ctx, "table.operations tbody"); !strings.Contains(got, "po-4711") || strings.Contains(got, "po-4712") || !strings.Contains(got, "succeeded") {
		t.Fatalf("the Operations page filtered by key po-4711 lists:\n%s", got)
	}
	screenshot(t, ctx, "console-operations.png")
	step(t, ctx, "open its timeline",
		chromedp.Click(chromedp.CSS("#row-"+op.ID.String()+" a")),
		chromedp.WaitVisible(chromedp.CSS("table.timeline")),
	)
	if got := text(t, ctx, "table.timeline tbody"); !regexp.MustCompile(`\d\d:\d\d:\d\d\.\d{3}Z`).MatchString(got) || !strings.Contains(got, "succeeded") {
		t.Fatalf("the timeline of po-4711 reads:\n%s", got)
	}
	if got := text(t, ctx, "dl.facts"); !strings.Contains(got, op.ID.String()) {
		t.Fatalf("the timeline page is not po-4711's:\n%s", got)
	}

	step(t, ctx, "sign out", chromedp.Click(chromedp.CSS("form.who button")), chromedp.WaitVisible(chromedp.CSS("#token")))
	signInWith(t, ctx, p, p.Operator, "/console/review", "table.queue")
	step(t, ctx, "select two and fill the form",
		chromedp.Click(chromedp.CSS(`input[value="op:`+a.ID.String()+`"]`)),
		chromedp.Click(chromedp.CSS(`input[value="op:`+b.ID.String()+`"]`)),
		chromedp.Click(chromedp.CSS(`input[value="resolve_cancelled"]`)),
		chromedp.SendKeys(chromedp.CSS(`fieldset.act input[name="note"]`), "customer withdrew the order"),
	)
	screenshot(t, ctx, "console-review.png")
	step(t, ctx, "resolve the two",
		chromedp.Click(chromedp.CSS("fieldset.act button")),
		chromedp.WaitVisible(chromedp.CSS("table.results")),
	)
	if got := text(t, ctx, "main"); !strings.Contains(got, "2 of 2 item(s) done") || strings.Count(got, "done: now cancelled") != 2 {
		t.Fatalf("the results page says:\n%s", got)
	}
	for _, op := range []ledger.Operation{a, b} {
		if got := p.Get(op); got.Status != ledger.StatusCancelled {
			t.Errorf("%s is %s, want cancelled", op.Key, got.Status)
		}
	}
	if got := p.Get(c); got.Status != ledger.StatusReview {
		t.Errorf("the item not selected is %s, want still review", got.Status)
	}
}
