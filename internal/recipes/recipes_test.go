package recipes_test

import (
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/actledger/actledger/internal/mocksupplier/traffic"
	"github.com/actledger/actledger/internal/testpipeline"
	"github.com/actledger/actledger/ledger"
)

// settle bounds how long an operation may take to settle through the
// pipeline.
const settle = 30 * time.Second

// recipe is one page of docs/providers and how to run it against its
// fake.
type recipe struct {
	// page is the file under docs/providers; provider and action are of
	// its providers file; params are a valid proposal's.
	page, provider, action, params string
	// env holds the credentials and secrets the file names; secrets are
	// the values that must reach the fake (or sign its webhooks) and
	// nothing else.
	env     map[string]string
	secrets []string
	// lag is how far the clock is moved once the operation is unknown,
	// past the file's visibility lag; 0 when a resend under the key
	// settles it.
	lag time.Duration
	// start runs the fake on clock.
	start func(t *testing.T, clock *testpipeline.Clock) *fake
}

// fake is a running fake supplier, as the tests use it.
type fake struct {
	url string
	// effects counts the supplier's effects carrying reference.
	effects func(reference string) int
	// effectID, when set, is the supplier's own id of the effect carrying
	// reference ("" when there is none).
	effectID func(reference string) string
	// loseNext makes the next create commit, then drop the connection
	// without an answer.
	loseNext func()
	// requests are every request the fake received.
	requests func() []traffic.Request
	// credential is the header every request must carry.
	credential string
	// webhooks, when set, points the fake's signed webhooks at url.
	webhooks func(url string)
	// refuseResends, when set, makes the next creates be refused before
	// any effect (a rate limit), so that a webhook, not a resend under
	// the key, settles the lost response.
	refuseResends func()
	// setup, when set, prepares the fake for the operation (e.g. the
	// payment a refund refunds) and may rewrite its params.
	setup func(t *testing.T, params string) string
}

// providersFile reads the one yaml block of a page.
func providersFile(t *testing.T, page string) string {
	t.Helper()
	raw, err := os.ReadFile("../../docs/providers/" + page)
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(raw), "```yaml\n")
	block, _, closed := strings.Cut(rest, "\n```")
	if !ok || !closed || strings.Contains(rest[len(block):], "```yaml") {
		t.Fatalf("%s: want exactly one ```yaml block", page)
	}
	return block + "\n"
}

// run loads r's page unchanged, loses the first create's response after
// the supplier committed it, and waits for the operation to settle, by
// webhook when viaWebhook, else by the file's key or lookup. It checks
// that the supplier holds one effect and that no secret value reached
// anything but the supplier.
func run(t *testing.T, r recipe, viaWebhook bool) {
	clock := &testpipeline.Clock{}
	f := r.start(t, clock)
	logs := &testpipeline.LogBuffer{}
	p := testpipeline.New(t, testpipeline.Options{
		ProvidersFile: providersFile(t, r.page), BaseURLs: map[string]string{r.provider: f.url},
		Tenant: "acme-corp", Env: r.env, Clock: clock, Metrics: true,
		// The pages give real suppliers' timeouts (15s); a lease must outlast a call.
		Lease:  time.Minute,
		Logger: slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
	})
	if viaWebhook {
		f.webhooks(p.API.URL + "/v1/webhooks/" + r.provider)
	}

	params := r.params
	if f.setup != nil {
		params = f.setup(t, params)
	}
	f.loseNext()
	if viaWebhook && f.refuseResends != nil {
		f.refuseResends()
	}
	op := p.EnqueueAction(r.action, "k-1", params)
	p.Start(1)
	p.Eventually(settle, "the lost response to be seen", func() bool {
		s := p.Get(op).Status
		return s == ledger.StatusUnknown || s == ledger.StatusSucceeded || s == ledger.StatusReview
	})
	if !viaWebhook && r.lag > 0 && p.Get(op).Status == ledger.StatusUnknown {
		clock.Advance(r.lag)
	}
	done := p.WaitStatus(op, ledger.StatusSucceeded, settle)
	history := p.History(op)
	if n := f.effects(op.ExternalKey); n != 1 {
		t.Errorf("the supplier holds %d effects for the operation, want 1; history:\n%s", n, history)
	}
	if done.ProviderReference == nil || *done.ProviderReference == "" {
		t.Errorf("no provider reference recorded; history:\n%s", history)
	}
	settledBy := "lookup_found"
	switch {
	case viaWebhook:
		settledBy = `"source": "webhook:`
	case r.lag == 0:
		settledBy = "resend_same_key"
	}
	if !strings.Contains(history, settledBy) {
		t.Errorf("want it settled by %s; history:\n%s", settledBy, history)
	}
	for i, req := range f.requests() {
		if req.Header.Get(f.credential) == "" {
			t.Errorf("request %d at the supplier carried no %s", i, f.credential)
		}
	}
	secretsNowhere(t, p, op, logs, r.secrets)
}

// secretsNowhere checks that no secret value is in the logs, the
// operation's history and answers, the review list, /metrics or the
// console's page of the operation.
func secretsNowhere(t *testing.T, p *testpipeline.Pipeline, op ledger.Operation, logs *testpipeline.LogBuffer, secrets []string) {
	t.Helper()
	places := map[string]string{"logs": logs.String(), "history": p.History(op)}
	for _, path := range []string{"/v1/operations/" + op.ID.String(), "/v1/operations/" + op.ID.String() + "/events", "/v1/review", "/v1/dispatch"} {
		_, out := p.Do("GET", path, p.Operator, "")
		places[path] = fmt.Sprint(out)
	}
	for path, cookie := range map[string]bool{"/metrics": false, "/console/operations/" + op.ID.String(): true} {
		req, _ := http.NewRequest("GET", p.API.URL+path, nil)
		if cookie {
			req.AddCookie(p.ConsoleCookie(p.Operator))
		} else {
			req.Header.Set("Authorization", "Bearer "+p.MetricsToken())
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Errorf("GET %s answered %d", path, resp.StatusCode)
		}
		places[path] = string(body)
	}
	for _, name := range slices.Sorted(maps.Keys(places)) {
		for _, secret := range secrets {
			if strings.Contains(places[name], secret) {
				t.Errorf("%s holds a secret value", name)
			}
		}
	}
}

func newServer(t *testing.T, h http.Handler) string {
	t.Helper()
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return srv.URL
}
