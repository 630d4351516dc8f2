package console_test

import (
	"context"
	"fmt"
	"html"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/actledger/actledger/ledger"
)

// TestBrowserCrossOriginPagesCannotDecideAndScriptsCannotReadTheSession
// drives a real headless chromium signed in as an approver: the page's
// scripts cannot read the session cookie (HttpOnly); a form on a page of
// another origin on the same host (same site, so a SameSite=Strict cookie
// still goes along) and one on another site both post an approve to the
// console and are refused, nothing changed; then the approver denies a
// proposal with a reason and reads its summary and timeline on the
// operation page.
func TestBrowserCrossOriginPagesCannotDecideAndScriptsCannotReadTheSession(t *testing.T) {
	t.Parallel()
	p := setup(t)
	ctx := browser(t)
	target := propose(t, p, "po-7001", `{"sku":"A-1","qty":40}`)
	denied := propose(t, p, "po-7002", `{"sku":"C-3","qty":12}`)

	signInWith(t, ctx, p, p.Approver, "/console/approvals", "#op-"+target.ID.String())
	c, cancel := context.WithTimeout(ctx, 30*time.Second)
	jar, err := chromedp.Run(c, chromedp.Evaluate[string](`document.cookie`))
	cancel()
	if err != nil {
		t.Fatalf("read document.cookie: %v", err)
	}
	if jar != "" {
		t.Errorf("a script on a console page reads the cookies %q; the session must be HttpOnly", jar)
	}

	// A page elsewhere that makes the signed-in browser post an approve.
	evil := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		fmt.Fprintf(w, `<!doctype html><title>win a prize</title>
<form method="post" action="%s/console/approvals/%s/approve">
<input type="hidden" name="params_fingerprint" value="%s">
<button id="prize" type="submit">Claim your prize</button></form>`,
			html.EscapeString(p.API.URL), target.ID, html.EscapeString(target.ParamsFingerprint))
	}))
	t.Cleanup(evil.Close)
	for _, tt := range []struct{ name, url string }{
		{"same site, another origin", evil.URL},
		{"another site", strings.Replace(evil.URL, "127.0.0.1", "localhost", 1)},
	} {
		step(t, ctx, tt.name+": submit the form",
			chromedp.Navigate(tt.url),
			chromedp.WaitVisible(chromedp.CSS("#prize")),
			chromedp.Click(chromedp.CSS("#prize")),
			chromedp.WaitVisible(chromedp.CSS("main")),
		)
		if got := text(t, ctx, "main"); !strings.Contains(got, "another site") {
			t.Errorf("%s: the console answered the forged approve with:\n%s", tt.name, got)
		}
		if got := p.Get(target); got.Status != ledger.StatusAwaitingApproval {
			t.Fatalf("%s: the proposal is %s after a forged approve, want awaiting_approval", tt.name, got.Status)
		}
	}

	deny := "#op-" + denied.ID.String()
	step(t, ctx, "deny with a reason",
		chromedp.Navigate(p.API.URL+"/console/approvals"),
		chromedp.WaitVisible(chromedp.CSS(deny)),
		chromedp.SendKeys(chromedp.CSS(deny+` input[name="reason"]`), "wrong supplier for C-3"),
		chromedp.Click(chromedp.CSS(deny+" button.deny")),
		chromedp.WaitVisible(chromedp.CSS("p.notice")),
	)
	if got := text(t, ctx, "p.notice"); !strings.Contains(got, "Denied "+denied.ID.String()) {
		t.Errorf("after deny the page says %q", got)
	}
	got := p.Get(denied)
	if got.Status != ledger.StatusCancelled || got.DecisionReason == nil || *got.DecisionReason != "wrong supplier for C-3" {
		t.Fatalf("after deny the proposal is %s (reason %v), want cancelled with the reason", got.Status, got.DecisionReason)
	}

	step(t, ctx, "open the operation page",
		chromedp.Navigate(p.API.URL+"/console/operations/"+denied.ID.String()),
		chromedp.WaitVisible(chromedp.CSS("table.timeline")),
	)
	if summary := text(t, ctx, "p.summary"); summary != got.Summary() {
		t.Errorf("the page's summary %q, the operation's %q", summary, got.Summary())
	}
	// The detail cells are folded (<details>): read the text, not what shows.
	c, cancel = context.WithTimeout(ctx, 30*time.Second)
	timeline, err := chromedp.Run(c, chromedp.TextContent(chromedp.CSS("table.timeline")))
	cancel()
	if err != nil {
		t.Fatalf("read the timeline: %v", err)
	}
	for _, want := range []string{"created", "cancelled", "wrong supplier for C-3"} {
		if !strings.Contains(timeline, want) {
			t.Errorf("the timeline does not show %q:\n%s", want, timeline)
		}
	}
}

// TestBrowserFormsWorkWithoutFetchMetadata drives a real headless
// chromium through a proxy that strips Sec-Fetch-Site, as a browser
// without Fetch Metadata would send the console's forms: they still name
// the console's own origin (the pages' Referrer-Policy does not turn it
// into "null"), so signing in and approving work, and the ledger shows
// the approval.
func TestBrowserFormsWorkWithoutFetchMetadata(t *testing.T) {
	t.Parallel()
	p := setup(t)
	ctx := browser(t)
	op := propose(t, p, "po-7101", `{"sku":"A-1","qty":3}`)
	target, err := url.Parse(p.API.URL)
	if err != nil {
		t.Fatal(err)
	}
	proxy := httptest.NewServer(&httputil.ReverseProxy{Rewrite: func(r *httputil.ProxyRequest) {
		r.SetURL(target)
		r.Out.Host = r.In.Host
		r.Out.Header.Del("Sec-Fetch-Site")
	}})
	t.Cleanup(proxy.Close)

	step(t, ctx, "sign in and approve through the proxy",
		chromedp.Navigate(proxy.URL+"/console/signin"),
		chromedp.WaitVisible(chromedp.CSS("#token")),
		chromedp.SendKeys(chromedp.CSS("#token"), p.Approver),
		chromedp.Click(chromedp.CSS("form.signin button")),
		chromedp.WaitVisible(chromedp.CSS("#overview")),
		chromedp.Click(chromedp.CSS(`nav a[href="/console/approvals"]`)),
		chromedp.WaitVisible(chromedp.CSS("#op-"+op.ID.String())),
		chromedp.Click(chromedp.CSS("#op-"+op.ID.String()+" button.approve")),
		chromedp.WaitVisible(chromedp.CSS("p.notice")),
	)
	if got := text(t, ctx, "p.notice"); !strings.Contains(got, "Approved "+op.ID.String()) {
		t.Errorf("after approve the page says %q", got)
	}
	if got := p.Get(op); got.Status != ledger.StatusQueued {
		t.Errorf("the proposal is %s after the approve, want queued", got.Status)
	}
}
