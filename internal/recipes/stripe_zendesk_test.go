package recipes_test

import (
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/actledger/actledger/internal/mocksupplier/stripe"
	"github.com/actledger/actledger/internal/mocksupplier/zendesk"
	"github.com/actledger/actledger/internal/testpipeline"
)

const (
	stripeKey            = "sk_test_recipeKEY51HxAbCdEf0123"
	stripePaymentsSecret = "whsec_recipe_payments_9f8e7d6c"
	stripeRefundsSecret  = "whsec_recipe_refunds_1a2b3c4d"
	zendeskToken         = "zd-oauth-recipe-token-77aa88bb"
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
			form := url.Values{"amount": {"1999"}, "currency": {"usd"}, "customer": {"cus_Nx1"}, "payment_method": {"pm_card_visa"}, "confirm": {"true"}}
			req, _ := http.NewRequest("POST", f.url+"/v1/payment_intents", strings.NewReader(form.Encode()))
			req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
			req.Header.Set("Authorization", "Bearer "+stripeKey)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			var pi struct{ ID string }
			if err := json.NewDecoder(resp.Body).Decode(&pi); err != nil || pi.ID == "" {
				t.Fatalf("create the payment to refund: %d %v", resp.StatusCode, err)
			}
			return strings.Replace(params, `"PI"`, `"`+pi.ID+`"`, 1)
		}
		return f
	},
}

var zendeskRecipe = recipe{
	page: "zendesk.md", provider: "zendesk", action: "support.open_ticket",
	params:  `{"case_id":"case-81","subject":"Printer on fire","body":"Third floor, since 9:00."}`,
	env:     map[string]string{"ZENDESK_OAUTH_TOKEN": zendeskToken},
	secrets: []string{zendeskToken},
	start: func(t *testing.T, clock *testpipeline.Clock) *fake {
		s := zendesk.New(zendesk.Config{OAuthToken: zendeskToken, LookupLag: 5 * time.Second, Now: clock.Now})
		t.Cleanup(s.Close)
		return &fake{
			url: newServer(t, s), effects: s.Effects, credential: "Authorization",
			loseNext: func() { s.Fail(zendesk.Fault{Kind: zendesk.DropAfterCommit}) },
			requests: s.Requests,
		}
	},
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
