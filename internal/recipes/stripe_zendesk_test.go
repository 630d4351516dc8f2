package recipes_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/actledger/actledger/internal/mocksupplier/stripe"
	"github.com/actledger/actledger/internal/mocksupplier/zendesk"
	"github.com/actledger/actledger/internal/testpipeline"
	"github.com/actledger/actledger/ledger"
)

const (
	stripeKey            = "sk_test_recipeKEY51HxAbCdEf0123"
	stripePaymentsSecret = "whsec_recipe_payments_9f8e7d6c"
	stripeRefundsSecret  = "whsec_recipe_refunds_1a2b3c4d"
	zendeskToken         = "zd-oauth-recipe-token-77aa88bb"
	zendeskSecret        = "zd-webhook-signing-secret-5e6f7a8b"
)

var stripeEnv = map[string]string{
	"STRIPE_SECRET_KEY": stripeKey, "STRIPE_PAYMENTS_WEBHOOK_SECRET": stripePaymentsSecret,
	"STRIPE_REFUNDS_WEBHOOK_SECRET": stripeRefundsSecret,
}

// stripeFake runs the fake Stripe for one provider of the page, its
// webhooks signed with secret for the events given.
func stripeFake(t *testing.T, clock *testpipeline.Clock, path, secret string, events ...string) (*stripe.Server, *fake) {
	s := stripe.New(stripe.Config{APIKey: stripeKey, SearchLag: 30 * time.Second, Now: clock.Now})
	t.Cleanup(s.Close)
	return s, &fake{
		url: newServer(t, s), effects: s.Effects, credential: "Authorization",
		loseNext: func() { s.Fail(stripe.Fault{Kind: stripe.DropAfterCommit, Path: path}) },
		refuseResends: func() {
			for range 5 {
				s.Fail(stripe.Fault{Kind: stripe.RateLimited, Path: path, RetryAfter: time.Minute})
			}
		},
		requests: s.Requests,
		webhooks: func(url string) {
			s.SetWebhooks(stripe.WebhookEndpoint{URL: url, Secret: secret, EnabledEvents: events, Delay: 100 * time.Millisecond})
		},
	}
}

var stripePaymentsRecipe = recipe{
	page: "stripe.md", provider: "stripe-payments", action: "payments.create_intent",
	params:  `{"order_id":"po-37","amount":1999,"currency":"usd","customer":"cus_Nx1","payment_method":"pm_card_visa"}`,
	env:     stripeEnv,
	secrets: []string{stripeKey, stripePaymentsSecret, stripeRefundsSecret},
	start: func(t *testing.T, clock *testpipeline.Clock) *fake {
		_, f := stripeFake(t, clock, stripe.PathPaymentIntents, stripePaymentsSecret, "payment_intent.succeeded")
		return f
	},
}

var stripeRefundsRecipe = recipe{
	page: "stripe.md", provider: "stripe-refunds", action: "payments.refund",
	params:  `{"refund_request_id":"rr-5","payment_intent":"PI"}`,
	env:     stripeEnv,
	secrets: []string{stripeKey, stripePaymentsSecret, stripeRefundsSecret},
	start: func(t *testing.T, clock *testpipeline.Clock) *fake {
		_, f := stripeFake(t, clock, stripe.PathRefunds, stripeRefundsSecret, "refund.created")
		// The payment the refund refunds, made at the fake beforehand.
		f.setup = func(t *testing.T, params string) string {
			return strings.Replace(params, `"PI"`, `"`+stripePayment(t, f.url, nil)+`"`, 1)
		}
		return f
	},
}

// stripePost sends a create to the fake Stripe as someone working by hand
// in the account would (its own request, no idempotency key) and returns
// the created object's id.
func stripePost(t *testing.T, baseURL, path string, form url.Values) string {
	t.Helper()
	req, _ := http.NewRequest("POST", baseURL+path, strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Authorization", "Bearer "+stripeKey)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var obj struct{ ID string }
	if err := json.NewDecoder(resp.Body).Decode(&obj); err != nil || obj.ID == "" {
		t.Fatalf("POST %s: %d %v", path, resp.StatusCode, err)
	}
	return obj.ID
}

// stripePayment makes a succeeded payment of 1999 usd at the fake, with
// metadata (nil: none), and returns its PaymentIntent's id.
func stripePayment(t *testing.T, baseURL string, metadata map[string]string) string {
	t.Helper()
	form := url.Values{"amount": {"1999"}, "currency": {"usd"}, "customer": {"cus_Nx1"}, "payment_method": {"pm_card_visa"}, "confirm": {"true"}}
	for k, v := range metadata {
		form.Set("metadata["+k+"]", v)
	}
	return stripePost(t, baseURL, "/v1/payment_intents", form)
}

var zendeskRecipe = recipe{
	page: "zendesk.md", provider: "zendesk", action: "support.open_ticket",
	params:  `{"case_id":"case-81","subject":"Printer on fire","body":"Third floor, since 9:00."}`,
	env:     map[string]string{"ZENDESK_OAUTH_TOKEN": zendeskToken, "ZENDESK_WEBHOOK_SECRET": zendeskSecret},
	secrets: []string{zendeskToken, zendeskSecret},
	start: func(t *testing.T, clock *testpipeline.Clock) *fake {
		s := zendesk.New(zendesk.Config{OAuthToken: zendeskToken, LookupLag: 5 * time.Second, Now: clock.Now})
		t.Cleanup(s.Close)
		return &fake{
			url: newServer(t, s), effects: s.Effects, credential: "Authorization",
			loseNext: func() { s.Fail(zendesk.Fault{Kind: zendesk.DropAfterCommit}) },
			effectID: func(reference string) string {
				if ts := s.Tickets(reference); len(ts) > 0 {
					return strconv.FormatInt(ts[0].ID, 10)
				}
				return ""
			},
			refuseResends: func() {
				for range 5 {
					s.Fail(zendesk.Fault{Kind: zendesk.RateLimited, RetryAfter: time.Minute})
				}
			},
			requests: s.Requests,
			webhooks: func(url string) {
				s.SetWebhook(&zendesk.Webhook{URL: url, Secret: zendeskSecret, Delay: 100 * time.Millisecond})
			},
		}
	},
}

// zendeskTicket opens a ticket at the fake Zendesk as an agent working by
// hand would (no idempotency key), with externalID when it is not empty.
func zendeskTicket(t *testing.T, baseURL, externalID string) {
	t.Helper()
	ticket := map[string]any{"subject": "By hand", "comment": map[string]string{"body": "Opened in the agent workspace."}}
	if externalID != "" {
		ticket["external_id"] = externalID
	}
	body, _ := json.Marshal(map[string]any{"ticket": ticket})
	req, _ := http.NewRequest("POST", baseURL+"/api/v2/tickets.json", strings.NewReader(string(body)))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+zendeskToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusCreated {
		t.Fatalf("open a ticket by hand: %d", resp.StatusCode)
	}
}

// Stripe keeps an idempotency key 24 hours: after a response lost once
// the payment exists, the resend under the same key gets the stored
// answer, and the customer is charged once.
func TestStripePaymentsRecipeLostResponseChargesOnce(t *testing.T) {
	t.Parallel()
	run(t, stripePaymentsRecipe, false)
}

// While Stripe rate-limits the resends, its signed payment_intent.succeeded
// webhook (Stripe-Signature) settles the lost response.
func TestStripePaymentsRecipeLostResponseIsSettledByTheSignedWebhook(t *testing.T) {
	t.Parallel()
	run(t, stripePaymentsRecipe, true)
}

// A refund's lost response is settled by the resend under its key: one
// refund.
func TestStripeRefundsRecipeLostResponseRefundsOnce(t *testing.T) {
	t.Parallel()
	run(t, stripeRefundsRecipe, false)
}

// Stripe has no search for refunds; its refund.created webhook settles a
// lost response while the resends are rate-limited.
func TestStripeRefundsRecipeLostResponseIsSettledByTheSignedWebhook(t *testing.T) {
	t.Parallel()
	run(t, stripeRefundsRecipe, true)
}

// Zendesk keeps an Idempotency-Key two hours: the resend under it gets
// the ticket created by the lost request; one ticket.
func TestZendeskRecipeLostResponseOpensOneTicket(t *testing.T) {
	t.Parallel()
	run(t, zendeskRecipe, false)
}

// Stripe cannot search refunds, but lists them: a refund whose answer was
// lost while Stripe rate-limits the resends is settled by the statement
// with the refund it lists (one refund at Stripe, never a second create);
// a refund made through actledger is matched; one made by hand under a
// copied reference is unexplained, and one made by hand without a
// reference is foreign.
func TestStripeRefundsRecipeStatementSettlesALostRefund(t *testing.T) {
	t.Parallel()
	clock := &testpipeline.Clock{}
	s, f := stripeFake(t, clock, stripe.PathRefunds, stripeRefundsSecret)
	p := statementPipeline(t, stripeRefundsRecipe, f, clock)
	refund := func(request string) string {
		return fmt.Sprintf(`{"refund_request_id":%q,"payment_intent":%q}`, request, stripePayment(t, f.url, nil))
	}

	matched := p.WaitStatus(p.EnqueueAction("payments.refund", "k-1", refund("rr-1")), ledger.StatusSucceeded, settle)
	copied := stranger()
	stripePost(t, f.url, "/v1/refunds", url.Values{"payment_intent": {stripePayment(t, f.url, nil)}, "metadata[reference]": {copied}})
	stripePost(t, f.url, "/v1/refunds", url.Values{"payment_intent": {stripePayment(t, f.url, nil)}})
	params := refund("rr-2")
	f.loseNext()
	f.refuseResends()
	lost := p.EnqueueAction("payments.refund", "k-2", params)
	refusedOnce(t, p, lost)

	// Stripe's lists do not lag: the run may read up to now.
	rep := reconcileLastHour(t, p, "stripe-refunds", 2*time.Second)
	wantFindings(t, rep, map[ledger.Finding]int64{ledger.FindingMatched: 1, ledger.FindingSettles: 1, ledger.FindingUnexplained: 1, ledger.FindingForeign: 1})
	if got := unexplained(rep); !slices.Equal(got, []string{copied}) {
		t.Fatalf("unexplained %v, want the copied reference %s", got, copied)
	}
	settledByTheStatement(t, p, f, lost, s.Refunds(lost.ExternalKey)[0].ID)
	if got := p.Get(matched); got.Status != ledger.StatusSucceeded {
		t.Fatalf("the matched refund is %s after the run", got.Status)
	}
}

// The PaymentIntents list is the statement of the payments: a charge
// whose answer was lost while Stripe rate-limits the resends is settled
// by it (one PaymentIntent, never a second), a charge made through
// actledger is matched, one made by hand under a copied reference is
// unexplained and one made by hand without any is foreign.
func TestStripePaymentsRecipeStatementSettlesALostCharge(t *testing.T) {
	t.Parallel()
	clock := &testpipeline.Clock{}
	s, f := stripeFake(t, clock, stripe.PathPaymentIntents, stripePaymentsSecret)
	p := statementPipeline(t, stripePaymentsRecipe, f, clock)
	order := func(id string) string {
		return fmt.Sprintf(`{"order_id":%q,"amount":1999,"currency":"usd","customer":"cus_Nx1","payment_method":"pm_card_visa"}`, id)
	}

	p.WaitStatus(p.EnqueueAction("payments.create_intent", "k-1", order("po-1")), ledger.StatusSucceeded, settle)
	copied := stranger()
	stripePayment(t, f.url, map[string]string{"reference": copied})
	stripePayment(t, f.url, nil)
	f.loseNext()
	f.refuseResends()
	lost := p.EnqueueAction("payments.create_intent", "k-2", order("po-2"))
	refusedOnce(t, p, lost)

	rep := reconcileLastHour(t, p, "stripe-payments", 2*time.Second)
	wantFindings(t, rep, map[ledger.Finding]int64{ledger.FindingMatched: 1, ledger.FindingSettles: 1, ledger.FindingUnexplained: 1, ledger.FindingForeign: 1})
	if got := unexplained(rep); !slices.Equal(got, []string{copied}) {
		t.Fatalf("unexplained %v, want the copied reference %s", got, copied)
	}
	settledByTheStatement(t, p, f, lost, s.PaymentIntents(lost.ExternalKey)[0].ID)
}

// While Zendesk rate-limits the resends under the key, its signed
// ticket.created webhook (X-Zendesk-Webhook-Signature, base64 of the
// HMAC-SHA256 of timestamp + body) names the reference in external_id and
// settles the lost response: one ticket.
func TestZendeskRecipeLostResponseIsSettledByTheSignedWebhook(t *testing.T) {
	t.Parallel()
	run(t, zendeskRecipe, true)
}

// The incremental ticket export is Zendesk's statement: a ticket whose
// answer was lost while the resends are rate-limited is settled by it
// (one ticket, never a second create), a ticket opened through actledger
// is matched, one opened by hand under a copied external_id is
// unexplained and one opened by hand without any is foreign.
func TestZendeskRecipeStatementSettlesALostTicket(t *testing.T) {
	t.Parallel()
	clock := &testpipeline.Clock{}
	f := zendeskRecipe.start(t, clock)
	p := statementPipeline(t, zendeskRecipe, f, clock)
	ticket := func(id string) string {
		return fmt.Sprintf(`{"case_id":%q,"subject":"Printer on fire","body":"Third floor, since 9:00."}`, id)
	}

	p.WaitStatus(p.EnqueueAction("support.open_ticket", "k-1", ticket("case-1")), ledger.StatusSucceeded, settle)
	copied := stranger()
	zendeskTicket(t, f.url, copied)
	zendeskTicket(t, f.url, "")
	f.loseNext()
	f.refuseResends()
	lost := p.EnqueueAction("support.open_ticket", "k-2", ticket("case-2"))
	refusedOnce(t, p, lost)

	// The export leaves out what changed in the minute before it is asked.
	rep := reconcileLastHour(t, p, "zendesk", 2*time.Minute)
	wantFindings(t, rep, map[ledger.Finding]int64{ledger.FindingMatched: 1, ledger.FindingSettles: 1, ledger.FindingUnexplained: 1, ledger.FindingForeign: 1})
	if got := unexplained(rep); !slices.Equal(got, []string{copied}) {
		t.Fatalf("unexplained %v, want the copied reference %s", got, copied)
	}
	settledByTheStatement(t, p, f, lost, f.effectID(lost.ExternalKey))
}
