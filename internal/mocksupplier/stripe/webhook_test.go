package stripe_test

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/actledger/actledger/internal/mocksupplier/internal/faketest"
	"github.com/actledger/actledger/internal/mocksupplier/stripe"
)

const secret = "whsec_test_actledger_signing_secret"

// receiver is a webhook endpoint answering the statuses in answers in turn (then 200).
func receiver(t *testing.T, answers ...int) (string, <-chan faketest.Received) {
	t.Helper()
	url, got := faketest.Receiver(t, http.StatusOK, answers...)
	return url + "/v1/webhooks/stripe-payments", got
}

// verify checks a Stripe-Signature the way Stripe tells receivers to, computed here on its own:
// split at commas, take t and every v1, compute HMAC-SHA256 of "<t>.<body>" under the endpoint
// secret and compare it with each v1. It returns the signed timestamp and the schemes seen.
func verify(t *testing.T, header string, body []byte) (time.Time, []string) {
	t.Helper()
	var ts string
	var v1s, schemes []string
	for part := range strings.SplitSeq(header, ",") {
		k, v, ok := strings.Cut(part, "=")
		if !ok {
			t.Fatalf("malformed element %q in %q", part, header)
		}
		schemes = append(schemes, k)
		switch k {
		case "t":
			ts = v
		case "v1":
			v1s = append(v1s, v)
		}
	}
	mac := hmac.New(sha256.New, []byte(secret))
	mac.Write([]byte(ts + "." + string(body)))
	want := hex.EncodeToString(mac.Sum(nil))
	ok := false
	for _, v1 := range v1s {
		ok = ok || hmac.Equal([]byte(v1), []byte(want))
	}
	if !ok {
		t.Fatalf("no v1 signature in %q matches HMAC-SHA256(secret, t.Body) = %s", header, want)
	}
	sec, err := strconv.ParseInt(ts, 10, 64)
	if err != nil {
		t.Fatalf("timestamp %q: %v", ts, err)
	}
	return time.Unix(sec, 0), schemes
}

// event decodes a delivered event.
func event(t *testing.T, body []byte) (stripe.Event, map[string]any) {
	t.Helper()
	var ev stripe.Event
	if err := json.Unmarshal(body, &ev); err != nil {
		t.Fatalf("decoding event %s: %v", body, err)
	}
	var obj map[string]any
	if err := json.Unmarshal(ev.Data.Object, &obj); err != nil {
		t.Fatalf("decoding data.object %s: %v", ev.Data.Object, err)
	}
	return ev, obj
}

func TestWebhookSignatureVerifiesWithAnIndependentComputation(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name       string
		v0         bool
		wantScheme []string
	}{
		{"v1 only", false, []string{"t", "v1"}},
		{"test-mode v0 as well", true, []string{"t", "v1", "v0"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			hook, got := receiver(t)
			f := setup(t, stripe.Config{Webhooks: []stripe.WebhookEndpoint{{
				URL: hook, Secret: secret, EnabledEvents: []string{"payment_intent.succeeded"}, TestModeV0: tt.v0,
			}}})
			pi := f.mustPost(t, "/v1/payment_intents", "key-200", intent("po-200", "1000")).object(t)
			r := faketest.Next(t, got)
			at, schemes := verify(t, r.Header.Get("Stripe-Signature"), r.Body)
			if !at.Equal(f.clock.Now().Truncate(time.Second)) {
				t.Errorf("signed at %v, want the server clock %v", at, f.clock.Now())
			}
			if strings.Join(schemes, ",") != strings.Join(tt.wantScheme, ",") {
				t.Errorf("schemes %v, want %v", schemes, tt.wantScheme)
			}
			ev, obj := event(t, r.Body)
			if !strings.HasPrefix(ev.ID, "evt_") || ev.Object != "event" || ev.Type != "payment_intent.succeeded" || ev.APIVersion == "" {
				t.Errorf("event %s", r.Body)
			}
			if ev.Request.IdempotencyKey == nil || *ev.Request.IdempotencyKey != "key-200" {
				t.Errorf("request.idempotency_key = %v, want key-200", ev.Request.IdempotencyKey)
			}
			md, _ := obj["metadata"].(map[string]any)
			if obj["id"] != pi["id"] || obj["object"] != "payment_intent" || obj["status"] != "succeeded" || md["reference"] != "po-200" {
				t.Errorf("data.object %s", ev.Data.Object)
			}
		})
	}
}

func TestWebhookIsRetriedOnNon2xxAndSignedAfreshEachTime(t *testing.T) {
	t.Parallel()
	hook, got := receiver(t, http.StatusInternalServerError, http.StatusBadRequest)
	c := faketest.NewClock(faketest.Start)
	ticking := func() time.Time { c.Advance(time.Second); return c.Now() } // every reading is later
	f := setup(t, stripe.Config{Now: ticking, Webhooks: []stripe.WebhookEndpoint{{
		URL: hook, Secret: secret, EnabledEvents: []string{"payment_intent.succeeded"}, Backoff: 10 * time.Millisecond,
	}}})
	f.mustPost(t, "/v1/payment_intents", "", intent("po-210", "1000"))
	var stamps []time.Time
	var ids []string
	for range 3 {
		r := faketest.Next(t, got)
		at, _ := verify(t, r.Header.Get("Stripe-Signature"), r.Body)
		stamps = append(stamps, at)
		ev, _ := event(t, r.Body)
		ids = append(ids, ev.ID)
	}
	if ids[0] != ids[1] || ids[1] != ids[2] {
		t.Errorf("a retry is the same event: ids %v", ids)
	}
	if !stamps[1].After(stamps[0]) || !stamps[2].After(stamps[1]) {
		t.Errorf("each attempt is signed with a new timestamp: %v", stamps)
	}
	faketest.WaitFor(t, 5*time.Second, func() bool { return len(f.sup.Deliveries()) == 3 })
	var statuses []int
	for _, d := range f.sup.Deliveries() {
		statuses = append(statuses, d.Status)
	}
	if want := []int{500, 400, 200}; !slices.Equal(statuses, want) {
		t.Errorf("delivery statuses %v, want %v", statuses, want)
	}
}

func TestWebhookEventsForEachEffect(t *testing.T) {
	t.Parallel()
	hook, got := receiver(t)
	f := setup(t, stripe.Config{Webhooks: []stripe.WebhookEndpoint{{URL: hook, Secret: secret}}})
	pi := f.mustPost(t, "/v1/payment_intents", "", intent("po-220", "1000")).object(t)
	f.mustPost(t, "/v1/refunds", "", url.Values{"payment_intent": {pi["id"].(string)}, "metadata[reference]": {"rf-220"}})

	want := map[string]string{ // type → the reference its data.object carries
		"payment_intent.created":   "po-220",
		"payment_intent.succeeded": "po-220",
		"refund.created":           "rf-220",
		"charge.refunded":          "po-220", // a charge carries its PaymentIntent's metadata, not the refund's
	}
	seen := map[string]string{}
	for range want {
		r := faketest.Next(t, got)
		verify(t, r.Header.Get("Stripe-Signature"), r.Body)
		ev, obj := event(t, r.Body)
		md, _ := obj["metadata"].(map[string]any)
		ref, _ := md["reference"].(string)
		seen[ev.Type] = ref
	}
	for typ, ref := range want {
		if seen[typ] != ref {
			t.Errorf("%s: data.object.metadata.reference = %q, want %q (seen %v)", typ, seen[typ], ref, seen)
		}
	}
	if n := len(f.sup.Events()); n != len(want) {
		t.Errorf("Events() = %d, want %d", n, len(want))
	}
}

func TestWebhookIsSentForAnEffectWhoseResponseWasLost(t *testing.T) {
	t.Parallel()
	hook, got := receiver(t)
	f := setup(t, stripe.Config{})
	f.sup.SetWebhooks(stripe.WebhookEndpoint{URL: hook, Secret: secret, EnabledEvents: []string{"payment_intent.succeeded"}})
	f.sup.Fail(stripe.Fault{Kind: stripe.DropAfterCommit})
	if _, err := f.post("/v1/payment_intents", "key-230", intent("po-230", "1000")); err == nil {
		t.Fatal("the response was not dropped")
	}
	r := faketest.Next(t, got)
	verify(t, r.Header.Get("Stripe-Signature"), r.Body)
	_, obj := event(t, r.Body)
	if md, _ := obj["metadata"].(map[string]any); md["reference"] != "po-230" {
		t.Errorf("the webhook names %v, want po-230", md)
	}
}
