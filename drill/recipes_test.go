package drill_test

import (
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/actledger/actledger/drill"
	"github.com/actledger/actledger/internal/mocksupplier/github"
	"github.com/actledger/actledger/internal/mocksupplier/postmark"
	"github.com/actledger/actledger/internal/mocksupplier/stripe"
	"github.com/actledger/actledger/internal/mocksupplier/zendesk"
	"github.com/actledger/actledger/provider"
)

// recipeFile is the one yaml block of a page of docs/providers, read as internal/recipes reads
// it, with each replacement of edits applied (old, new, old, new...; an old starting with "?" may
// be missing): base_url pointed at the fake, and what must be shorter for a test than for a real
// supplier.
func recipeFile(t *testing.T, page string, env map[string]string, edits ...string) *provider.Registry {
	t.Helper()
	raw, err := os.ReadFile("../docs/providers/" + page)
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(raw), "```yaml\n")
	block, _, closed := strings.Cut(rest, "\n```")
	if !ok || !closed {
		t.Fatalf("%s: no ```yaml block", page)
	}
	for i := 0; i+1 < len(edits); i += 2 {
		old, optional := strings.CutPrefix(edits[i], "?")
		if !strings.Contains(block, old) {
			if optional {
				continue
			}
			t.Fatalf("%s: the providers file has no %q to replace", page, old)
		}
		block = strings.ReplaceAll(block, old, edits[i+1])
	}
	reg, err := provider.ParseEnv([]byte(block+"\n"), func(k string) string { return env[k] })
	if err != nil {
		t.Fatalf("%s: %v", page, err)
	}
	return reg
}

const stripeKey = "sk_test_drillKEY51HxAbCdEf0123"

var stripeEnv = map[string]string{"STRIPE_SECRET_KEY": stripeKey,
	"STRIPE_PAYMENTS_WEBHOOK_SECRET": "whsec_drill_payments", "STRIPE_REFUNDS_WEBHOOK_SECRET": "whsec_drill_refunds"}

// stripeLag is the fake's search lag, and the file's visibility_lag in these tests (the page
// declares an hour, Stripe's outage figure).
const stripeLag = 500 * time.Millisecond

// stripeRecipe runs the fake Stripe (keys kept for retention; 0: Stripe's 24 h) and returns the
// recipe's providers file pointed at it.
func stripeRecipe(t *testing.T, retention time.Duration) (*stripe.Server, *provider.Registry) {
	t.Helper()
	s := stripe.New(stripe.Config{APIKey: stripeKey, SearchLag: stripeLag, KeyRetention: retention})
	srv := httptest.NewServer(s)
	t.Cleanup(func() { srv.Close(); s.Close() })
	return s, recipeFile(t, "stripe.md", stripeEnv,
		"https://api.stripe.com", srv.URL,
		"visibility_lag: 1h", "visibility_lag: "+stripeLag.String(),
		"?      lag: 15m", "      lag: "+stripeLag.String(),
		// The fake answers in milliseconds; expired_approval and worker_lost wait out a timeout.
		"timeout: 20s", "timeout: 1500ms")
}

const stripeParams = `{"order_id":"po-37","amount":1999,"currency":"usd","customer":"cus_Nx1","payment_method":"pm_card_visa"}`

func TestDrillPassesEveryScenarioAgainstTheStripeRecipeAndItsFake(t *testing.T) {
	t.Parallel()
	s, reg := stripeRecipe(t, 0)
	report, md := run(t, drill.Options{Registry: reg, Action: "payments.create_intent", Params: json.RawMessage(stripeParams)})
	t.Log(md)
	if !report.Passed {
		t.Errorf("report did not pass:\n%s", md)
	}
	for _, e := range report.Effects {
		if got := s.Effects(e.Reference); got != 1 {
			t.Errorf("effect %+v: the fake holds %d PaymentIntents for it", e, got)
		}
	}
}

func TestDrillFailsLostResponseWithTwoPaymentsWhenStripeForgetsItsKeys(t *testing.T) {
	t.Parallel()
	s, reg := stripeRecipe(t, time.Nanosecond) // every key is pruned at once: a resend is a new payment
	report, md := run(t, drill.Options{Registry: reg, Action: "payments.create_intent", Params: json.RawMessage(stripeParams),
		Only: []string{drill.LostResponse}})
	lost := scenario(t, report, drill.LostResponse)
	if report.Passed || lost.Passed == nil || *lost.Passed || lost.Effects == nil || *lost.Effects != 2 {
		t.Fatalf("lost_response: passed %v, effects %v; want failed with 2:\n%s", lost.Passed, lost.Effects, md)
	}
	if !strings.Contains(lost.Why, "does not honour the header") {
		t.Errorf("why %q", lost.Why)
	}
	if got := s.Effects(report.Effects[0].Reference); got != 2 {
		t.Errorf("the fake holds %d PaymentIntents, want 2", got)
	}
}

// recipeFake is a fake of a real supplier for a recipe drill: its URL and its own count of
// effects per reference.
type recipeFake struct {
	url     string
	effects func(reference string) int
}

func serveFake(t *testing.T, h interface {
	ServeHTTP(http.ResponseWriter, *http.Request)
}, effects func(string) int) recipeFake {
	t.Helper()
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return recipeFake{url: srv.URL, effects: effects}
}

// fakeLag is each fake's lookup lag in these tests, and the file's visibility_lag.
const fakeLag = 500 * time.Millisecond

// TestDrillPassesEveryScenarioAgainstEachRecipesFake runs the drill on the recipes whose lookup exists
// (docs/providers: Zendesk, GitHub, Postmark), each against its fake. The three are configured
// for environment production, so the drill runs them with AllowProduction only.
func TestDrillPassesEveryScenarioAgainstEachRecipesFake(t *testing.T) {
	t.Parallel()
	for _, r := range []struct {
		page, action, params, lag, timeout string
		// listLag: the fake lists a record as soon as its search finds it, so the page's
		// reconcile.lag may be shortened with its visibility_lag. Zendesk's incremental export
		// leaves out the last minute, as Zendesk's does: its reconcile.lag stays, and the drill
		// counts by the lookup, whose lag is the shorter.
		listLag bool
		env     map[string]string
		start   func(t *testing.T, env map[string]string) recipeFake
	}{
		{
			page: "zendesk.md", action: "support.open_ticket", lag: "visibility_lag: 30s", timeout: "timeout: 10s",
			params: `{"case_id":"case-81","subject":"Printer on fire","body":"Third floor, since 9:00."}`,
			env:    map[string]string{"ZENDESK_OAUTH_TOKEN": "zd_oauth_drill_0123456789", "ZENDESK_WEBHOOK_SECRET": "zd-webhook-secret-drill"},
			start: func(t *testing.T, env map[string]string) recipeFake {
				s := zendesk.New(zendesk.Config{OAuthToken: env["ZENDESK_OAUTH_TOKEN"], LookupLag: fakeLag})
				t.Cleanup(s.Close)
				return serveFake(t, s, s.Effects)
			},
		},
		{
			page: "github.md", action: "github.open_issue", lag: "visibility_lag: 15m", timeout: "timeout: 15s", listLag: true,
			params: `{"title":"Printer on fire","body":"Third floor.","labels":["hardware"]}`,
			env:    map[string]string{"GITHUB_TOKEN": "ghp_drillTESTtoken0123456789", "GITHUB_WEBHOOK_SECRET": "github-webhook-secret-drill"},
			start: func(t *testing.T, env map[string]string) recipeFake {
				s := github.New(github.Config{Token: env["GITHUB_TOKEN"], LookupLag: fakeLag})
				t.Cleanup(s.Close)
				return serveFake(t, s, s.Effects)
			},
		},
		{
			page: "postmark.md", action: "email.send", lag: "visibility_lag: 10m", timeout: "timeout: 15s", listLag: true,
			params: `{"to":"ann@example.com","subject":"Your order","text":"It ships today."}`,
			env:    map[string]string{"POSTMARK_SERVER_TOKEN": "pm-server-token-drill-0f3e9a1c"},
			start: func(t *testing.T, env map[string]string) recipeFake {
				s := postmark.New(postmark.Config{ServerToken: env["POSTMARK_SERVER_TOKEN"], LookupLag: fakeLag})
				return serveFake(t, s, s.Effects)
			},
		},
	} {
		t.Run(strings.TrimSuffix(r.page, ".md"), func(t *testing.T) {
			t.Parallel()
			f := r.start(t, r.env)
			base := regexp.MustCompile(`(?m)^    base_url: (\S+)`).FindStringSubmatch(providersBlock(t, r.page))
			if base == nil {
				t.Fatalf("%s: no base_url", r.page)
			}
			edits := []string{base[1], f.url, r.lag, "visibility_lag: " + fakeLag.String(), r.timeout, "timeout: 1500ms"}
			if r.listLag {
				edits = append(edits, "?      lag: 15m", "      lag: "+fakeLag.String())
			}
			reg := recipeFile(t, r.page, r.env, edits...)
			if _, err := drill.Check(drill.Options{Registry: reg, Action: r.action, Params: json.RawMessage(r.params)}); !errors.Is(err, drill.ErrRefused) {
				t.Errorf("a production provider without AllowProduction: %v, want refused", err)
			}
			report, md := run(t, drill.Options{Registry: reg, Action: r.action, Params: json.RawMessage(r.params), AllowProduction: true})
			if !report.Passed {
				t.Errorf("report did not pass:\n%s", md)
			}
			for _, e := range report.Effects {
				if got := f.effects(e.Reference); got != 1 || e.ProviderReference == nil {
					t.Errorf("effect %+v: the fake holds %d for it", e, got)
				}
			}
		})
	}
}

// providersBlock is the yaml block of a page, unchanged.
func providersBlock(t *testing.T, page string) string {
	t.Helper()
	raw, err := os.ReadFile("../docs/providers/" + page)
	if err != nil {
		t.Fatal(err)
	}
	_, rest, _ := strings.Cut(string(raw), "```yaml\n")
	block, _, _ := strings.Cut(rest, "\n```")
	return block
}
