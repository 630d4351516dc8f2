package mocksupplier_test

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/actledger/actledger/internal/mocksupplier"
	"github.com/actledger/actledger/internal/mocksupplier/internal/faketest"
)

// receiver is a webhook endpoint answering the statuses in answers in turn (then 204).
func receiver(t *testing.T, answers ...int) (url string, got <-chan faketest.Received) {
	t.Helper()
	url, got = faketest.Receiver(t, http.StatusNoContent, answers...)
	return url + "/v1/webhooks/acme", got
}

// verify checks a Webhook-Signature the way a receiver must: t=<unix>,v1=<hex HMAC-SHA256 of
// "<t>.<body>">.
func verify(t *testing.T, secret, header string, body []byte) time.Time {
	t.Helper()
	var ts, v1 string
	for part := range strings.SplitSeq(header, ",") {
		k, v, _ := strings.Cut(part, "=")
		switch k {
		case "t":
			ts = v
		case "v1":
			v1 = v
		}
	}
	unix, err := strconv.ParseInt(ts, 10, 64)
	if err != nil {
		t.Fatalf("signature %q: bad t: %v", header, err)
	}
	mac := hmac.New(sha256.New, []byte(secret))
	mac.Write([]byte(ts + "." + string(body)))
	want := mac.Sum(nil)
	gotMAC, err := hex.DecodeString(v1)
	if err != nil || !hmac.Equal(gotMAC, want) {
		t.Fatalf("signature %q does not verify with the secret", header)
	}
	return time.Unix(unix, 0)
}

func TestWebhookIsSignedAndDeliveredAfterDelay(t *testing.T) {
	t.Parallel()
	url, got := receiver(t)
	const secret = "whsec_test"
	f := setup(t, mocksupplier.Config{Webhook: &mocksupplier.WebhookConfig{URL: url, Secret: secret, Delay: 200 * time.Millisecond}})

	start := time.Now()
	order := f.create(t, "key-1", `{"client_reference":"po-1","sku":"bolt"}`).order(t)
	hook := faketest.Next(t, got)

	if waited := hook.At.Sub(start); waited < 200*time.Millisecond {
		t.Errorf("webhook arrived %v after the order, want at least the 200ms delay", waited)
	}
	signedAt := verify(t, secret, hook.Header.Get("Webhook-Signature"), hook.Body)
	if d := time.Since(signedAt); d < -time.Second || d > time.Minute {
		t.Errorf("signature time %v is not now", signedAt)
	}
	var ev struct {
		EventID           string             `json:"event_id"`
		Type              string             `json:"type"`
		Reference         string             `json:"reference"`
		ProviderReference string             `json:"provider_reference"`
		Status            string             `json:"status"`
		Data              mocksupplier.Order `json:"data"`
	}
	if err := json.Unmarshal(hook.Body, &ev); err != nil {
		t.Fatalf("decoding webhook %s: %v", hook.Body, err)
	}
	if !strings.HasPrefix(ev.EventID, "evt_") {
		t.Errorf("event_id = %q, want evt_<random>", ev.EventID)
	}
	wantFields := map[string][2]string{
		"type":               {ev.Type, "order.created"},
		"reference":          {ev.Reference, "po-1"},
		"provider_reference": {ev.ProviderReference, order.ID},
		"status":             {ev.Status, "succeeded"},
		"data.id":            {ev.Data.ID, order.ID},
	}
	for name, gw := range wantFields {
		if gw[0] != gw[1] {
			t.Errorf("%s = %q, want %q", name, gw[0], gw[1])
		}
	}

	faketest.WaitFor(t, 5*time.Second, func() bool { return len(f.sup.Deliveries()) == 1 })
	d := f.sup.Deliveries()[0]
	if d.EventID != ev.EventID || d.OrderID != order.ID || d.Attempt != 1 || d.Status != http.StatusNoContent {
		t.Errorf("delivery = %+v, want attempt 1 of %s answered 204", d, ev.EventID)
	}
}

func TestWebhookDeliveryRetriesUntilAcknowledged(t *testing.T) {
	t.Parallel()
	url, got := receiver(t, http.StatusInternalServerError, http.StatusServiceUnavailable, http.StatusOK)
	f := setup(t, mocksupplier.Config{Webhook: &mocksupplier.WebhookConfig{URL: url, Secret: "s"}})

	f.create(t, "key-1", `{"client_reference":"po-1"}`)
	for range 3 {
		faketest.Next(t, got)
	}

	faketest.WaitFor(t, 5*time.Second, func() bool { return len(f.sup.Deliveries()) == 3 })
	ds := f.sup.Deliveries()
	wantStatus := []int{500, 503, 200}
	for i, d := range ds {
		if d.Attempt != i+1 || d.Status != wantStatus[i] || d.EventID != ds[0].EventID {
			t.Errorf("delivery %d = %+v, want attempt %d answered %d for event %s", i, d, i+1, wantStatus[i], ds[0].EventID)
		}
	}
	select {
	case extra := <-got:
		t.Errorf("webhook sent again after a 200: %s", extra.Body)
	case <-time.After(300 * time.Millisecond):
	}
}

func TestOrdersCreatedByAdminAlsoSendWebhooks(t *testing.T) {
	t.Parallel()
	url, got := receiver(t)
	f := setup(t, mocksupplier.Config{})
	f.sup.SetWebhook(&mocksupplier.WebhookConfig{URL: url, Secret: "s"})

	r := f.must(t, http.MethodPost, "/admin/orders", "", `{"client_reference":"po-1"}`)
	hook := faketest.Next(t, got)

	verify(t, "s", hook.Header.Get("Webhook-Signature"), hook.Body)
	if !strings.Contains(string(hook.Body), r.order(t).ID) {
		t.Errorf("webhook %s does not name order %s", hook.Body, r.order(t).ID)
	}
}

func TestCloseStopsPendingWebhooks(t *testing.T) {
	t.Parallel()
	url, got := receiver(t)
	f := setup(t, mocksupplier.Config{Webhook: &mocksupplier.WebhookConfig{URL: url, Delay: time.Hour}})
	f.create(t, "key-1", `{"client_reference":"po-1"}`)

	closed := make(chan struct{})
	go func() {
		f.sup.Close()
		close(closed)
	}()

	select {
	case <-closed:
	case <-time.After(5 * time.Second):
		t.Fatal("Close did not return while a webhook was pending")
	}
	f.sup.Close() // idempotent
	select {
	case r := <-got:
		t.Errorf("webhook sent after Close: %s", r.Body)
	default:
	}
	if ds := f.sup.Deliveries(); len(ds) != 0 {
		t.Errorf("Deliveries = %v, want none", ds)
	}
}
