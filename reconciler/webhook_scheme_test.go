package reconciler_test

import (
	"bytes"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/actledger/actledger/internal/mocksupplier"
	"github.com/actledger/actledger/internal/testpipeline"
	"github.com/actledger/actledger/ledger"
	"github.com/actledger/actledger/webhook"
)

// standardSecret is a Standard Webhooks secret (whsec_ and base64).
const standardSecret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"

// A supplier's own webhooks (a webhook block: Standard Webhooks
// signatures, its body read by expressions) settle an unknown outcome
// through the real path: an event type the block ignores is stored and
// changes nothing, a redelivery is acknowledged once, a body signed in
// another scheme is refused, and the creation event settles the operation
// with the supplier's reference.
func TestSuppliersOwnWebhookSettlesAnUnknownOutcome(t *testing.T) {
	t.Parallel()
	p := testpipeline.New(t, testpipeline.Options{LookupLag: -1, Mode: mocksupplier.Ignore,
		Env: map[string]string{"ACME_STANDARD_SECRET": standardSecret},
		ProviderExtra: `    webhook:
      secret_env: ACME_STANDARD_SECRET
      signature: standard
      event_id: headers["webhook-id"]
      reference: body.data.client_reference
      outcome: 'body.type == "order.created" ? "succeeded" : "ignore"'
      provider_reference: body.data.id
`})
	p.Supplier.SetFaults("", mocksupplier.Fault{Kind: mocksupplier.DropAfterCommit})
	op := p.Enqueue("po-1", `{"sku":"A-1"}`)
	p.Start(1)
	// No lookup, no keys: the lost response goes to a person.
	p.WaitStatus(op, ledger.StatusReview, 15*time.Second)

	send := func(id, scheme, body string) int {
		t.Helper()
		req, _ := http.NewRequest("POST", p.API.URL+"/v1/webhooks/acme", bytes.NewBufferString(body))
		req.Header.Set("Content-Type", "application/json")
		h, err := webhook.SignHeaders(webhook.Scheme(scheme), []byte(standardSecret), id, time.Now(), []byte(body))
		if err != nil {
			t.Fatal(err)
		}
		for k, v := range h {
			req.Header[k] = v
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	viewed := fmt.Sprintf(`{"type":"order.viewed","data":{"id":"ord_9","client_reference":%q}}`, op.ExternalKey)
	if got := send("msg_1", "standard", viewed); got != http.StatusAccepted {
		t.Fatalf("ignored event answered %d, want 202", got)
	}
	if got := send("msg_1", "standard", viewed); got != http.StatusOK {
		t.Errorf("redelivered event answered %d, want 200", got)
	}
	created := fmt.Sprintf(`{"type":"order.created","data":{"id":"ord_9","client_reference":%q}}`, op.ExternalKey)
	if got := send("msg_2", "actledger", created); got != http.StatusUnauthorized {
		t.Errorf("event signed in another scheme answered %d, want 401", got)
	}
	p.Settled(10 * time.Second)
	if got := p.Get(op); got.Status != ledger.StatusReview {
		t.Fatalf("after the ignored event the operation is %s, want it still in review", got.Status)
	}
	if got := send("msg_2", "standard", created); got != http.StatusAccepted {
		t.Fatalf("creation event answered %d, want 202", got)
	}
	done := p.WaitStatus(op, ledger.StatusSucceeded, 15*time.Second)
	if done.ProviderReference == nil || *done.ProviderReference != "ord_9" || p.Orders(op) != 1 {
		t.Errorf("reference %v, orders %d; want ord_9 and the 1 order; history:\n%s", done.ProviderReference, p.Orders(op), p.History(op))
	}
	var ignored int
	if err := p.Pool.QueryRow(t.Context(), `SELECT count(*) FROM webhook_events WHERE status = 'ignored' AND outcome = 'ignored' AND applied_at IS NOT NULL`).Scan(&ignored); err != nil || ignored != 1 {
		t.Errorf("ignored events stored %d (%v), want 1", ignored, err)
	}
}

// A provider whose webhooks are signed the way Slack signs (signature:
// hmac, a few lines of the providers file) settles an unknown outcome
// through the real path: a signature over another body and a stale
// timestamp are refused (401, stale_signature for the old one), and the
// signed creation event settles the operation with one order at the
// supplier. The scheme's own correctness against Slack's documented
// example is webhook.TestHMACVerifiesEachSuppliersDocumentedSignature.
func TestHMACSignedWebhookSettlesAnUnknownOutcome(t *testing.T) {
	t.Parallel()
	const secret = "8f742231b10e8888abcd99yyyzzz85a5"
	scheme := webhook.HMAC{Header: "X-Slack-Signature", Encoding: webhook.EncodingHex, Prefix: "v0=",
		TimestampHeader: "X-Slack-Request-Timestamp", Signed: "v0:{timestamp}:{body}"}
	p := testpipeline.New(t, testpipeline.Options{LookupLag: -1, Mode: mocksupplier.Ignore,
		Env: map[string]string{"ACME_HMAC_SECRET": secret},
		ProviderExtra: `    webhook:
      secret_env: ACME_HMAC_SECRET
      signature: hmac
      hmac:
        header: X-Slack-Signature
        encoding: hex
        prefix: v0=
        timestamp_header: X-Slack-Request-Timestamp
        signed: 'v0:{timestamp}:{body}'
      event_id: body.event_id
      reference: body.reference
      outcome: '"succeeded"'
      provider_reference: body.order
`})
	p.Supplier.SetFaults("", mocksupplier.Fault{Kind: mocksupplier.DropAfterCommit})
	op := p.Enqueue("po-1", `{"sku":"A-1"}`)
	p.Start(1)
	p.WaitStatus(op, ledger.StatusReview, 15*time.Second)

	send := func(signedBody, body string, at time.Time) int {
		t.Helper()
		req, _ := http.NewRequest("POST", p.API.URL+"/v1/webhooks/acme", bytes.NewBufferString(body))
		req.Header.Set("Content-Type", "application/json")
		for k, v := range scheme.Sign([]byte(secret), at, []byte(signedBody)) {
			req.Header[k] = v
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	created := fmt.Sprintf(`{"event_id":"Ev1","reference":%q,"order":"ord_7"}`, op.ExternalKey)
	if got := send(`{"other":true}`, created, time.Now()); got != http.StatusUnauthorized {
		t.Errorf("signature over another body answered %d, want 401", got)
	}
	if got := send(created, created, time.Now().Add(-10*time.Minute)); got != http.StatusUnauthorized {
		t.Errorf("stale signature answered %d, want 401", got)
	}
	if got := p.Get(op); got.Status != ledger.StatusReview {
		t.Fatalf("after refused webhooks the operation is %s, want it still in review", got.Status)
	}
	if got := send(created, created, time.Now()); got != http.StatusAccepted {
		t.Fatalf("signed creation event answered %d, want 202", got)
	}
	done := p.WaitStatus(op, ledger.StatusSucceeded, 15*time.Second)
	if done.ProviderReference == nil || *done.ProviderReference != "ord_7" || p.Orders(op) != 1 {
		t.Errorf("reference %v, orders %d; want ord_7 and the 1 order; history:\n%s", done.ProviderReference, p.Orders(op), p.History(op))
	}
}
