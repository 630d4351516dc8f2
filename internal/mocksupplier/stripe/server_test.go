package stripe_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/actledger/actledger/internal/mocksupplier/internal/faketest"
	"github.com/actledger/actledger/internal/mocksupplier/stripe"
)

// fixture is a fake Stripe served over a real socket, and a client that never reuses
// connections, so Go's transport never silently re-sends a request whose connection was dropped.
type fixture struct {
	sup    *stripe.Server
	url    string
	client *http.Client
	clock  *faketest.Clock
}

func setup(t *testing.T, cfg stripe.Config) fixture {
	t.Helper()
	c := faketest.NewClock(faketest.Start)
	if cfg.Now == nil {
		cfg.Now = c.Now
	}
	sup := stripe.New(cfg)
	t.Cleanup(sup.Close)
	return fixture{sup: sup, url: faketest.Serve(t, sup), client: faketest.Client(), clock: c}
}

// reply is what a client saw, read as Stripe answers.
type reply struct{ faketest.Reply }

func (r reply) replayed() bool { return r.Header.Get("Idempotent-Replayed") == "true" }

func (r reply) object(t *testing.T) map[string]any {
	t.Helper()
	var m map[string]any
	r.Decode(t, &m)
	return m
}

func (r reply) err(t *testing.T) stripe.ErrorObject {
	t.Helper()
	var e struct {
		Error stripe.ErrorObject `json:"error"`
	}
	if err := json.Unmarshal(r.Body, &e); err != nil || e.Error.Type == "" {
		t.Fatalf("not a Stripe error body: %s (%v)", r.Body, err)
	}
	return e.Error
}

// send makes one request; auth is the Authorization header ("" for none).
func (f fixture) send(method, path, auth, key, contentType, body string) (reply, error) {
	r, err := faketest.Do(f.client, method, f.url+path, body,
		"Authorization", auth, "Idempotency-Key", key, "Content-Type", contentType)
	return reply{r}, err
}

const bearer = "Bearer " + stripe.DefaultAPIKey

// post sends a form-encoded create with the default key.
func (f fixture) post(path, key string, form url.Values) (reply, error) {
	return f.send(http.MethodPost, path, bearer, key, "application/x-www-form-urlencoded", form.Encode())
}

func (f fixture) mustPost(t *testing.T, path, key string, form url.Values) reply {
	t.Helper()
	r, err := f.post(path, key, form)
	if err != nil {
		t.Fatalf("POST %s: %v", path, err)
	}
	return r
}

func (f fixture) get(t *testing.T, pathAndQuery string) reply {
	t.Helper()
	r, err := f.send(http.MethodGet, pathAndQuery, bearer, "", "", "")
	if err != nil {
		t.Fatalf("GET %s: %v", pathAndQuery, err)
	}
	return r
}

// intent is the form of a PaymentIntent create carrying reference in metadata[reference].
func intent(reference string, amount string) url.Values {
	return url.Values{
		"amount": {amount}, "currency": {"eur"}, "payment_method": {"pm_card_visa"},
		"confirm": {"true"}, "metadata[reference]": {reference},
	}
}

func TestCredentialsAreRequiredAndAnsweredAsStripeDoes(t *testing.T) {
	t.Parallel()
	f := setup(t, stripe.Config{})
	tests := []struct {
		name       string
		auth       string
		wantStatus int
		wantMsg    string // a prefix of the error message
	}{
		{"no credential", "", http.StatusUnauthorized, "You did not provide an API key."},
		{"wrong bearer key", "Bearer sk_test_wrongkey9876", http.StatusUnauthorized, "Invalid API Key provided: sk_test_****"},
		{"bearer", bearer, http.StatusOK, ""},
		{"basic with the key as username", "Basic " + basic(stripe.DefaultAPIKey, ""), http.StatusOK, ""},
		{"basic with a wrong username", "Basic " + basic("sk_test_nope", ""), http.StatusUnauthorized, "Invalid API Key provided"},
		{"key in the wrong scheme", "Token " + stripe.DefaultAPIKey, http.StatusUnauthorized, "You did not provide an API key."},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := f.send(http.MethodGet, "/v1/refunds", tt.auth, "", "", "")
			if err != nil {
				t.Fatal(err)
			}
			if got.Status != tt.wantStatus {
				t.Fatalf("status = %d, want %d (%s)", got.Status, tt.wantStatus, got.Body)
			}
			if tt.wantStatus != http.StatusUnauthorized {
				return
			}
			e := got.err(t)
			if e.Type != "invalid_request_error" || !strings.HasPrefix(e.Message, tt.wantMsg) {
				t.Errorf("error = %+v, want invalid_request_error %q…", e, tt.wantMsg)
			}
			if strings.Contains(string(got.Body), "wrongkey9876") || strings.Contains(string(got.Body), stripe.DefaultAPIKey) {
				t.Errorf("the 401 body names a key in full: %s", got.Body)
			}
		})
	}
}

func basic(user, pass string) string {
	r, _ := http.NewRequest(http.MethodGet, "http://x", nil)
	r.SetBasicAuth(user, pass)
	return strings.TrimPrefix(r.Header.Get("Authorization"), "Basic ")
}

func TestRequestsRecordsEveryRequestWithItsHeaders(t *testing.T) {
	t.Parallel()
	f := setup(t, stripe.Config{})
	f.mustPost(t, "/v1/payment_intents", "k1", intent("ref-1", "500"))
	if _, err := f.send(http.MethodGet, "/v1/refunds", "", "", "", ""); err != nil {
		t.Fatal(err)
	}
	reqs := f.sup.Requests()
	if len(reqs) != 2 {
		t.Fatalf("recorded %d requests, want 2", len(reqs))
	}
	if got := reqs[0].Header.Get("Authorization"); got != bearer {
		t.Errorf("first request's Authorization = %q, want the bearer key", got)
	}
	if got := reqs[0].Header.Get("Idempotency-Key"); got != "k1" {
		t.Errorf("first request's Idempotency-Key = %q", got)
	}
	if !strings.Contains(string(reqs[0].Body), "metadata%5Breference%5D=ref-1") {
		t.Errorf("first request's body %q lacks the form-encoded metadata[reference]", reqs[0].Body)
	}
	if reqs[1].Header.Get("Authorization") != "" || reqs[1].Path != "/v1/refunds" {
		t.Errorf("second request recorded as %+v", reqs[1])
	}
}

func TestSameKeySameParamsReplaysTheStoredAnswer(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		second string // the repeat's body
	}{
		{"same parameters", intent("po-37", "1000").Encode()},
		{"same parameters in another order",
			"metadata%5Breference%5D=po-37&confirm=true&currency=eur&amount=1000&payment_method=pm_card_visa"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			f := setup(t, stripe.Config{})
			first := f.mustPost(t, "/v1/payment_intents", "key-37", intent("po-37", "1000"))
			if first.Status != http.StatusOK || first.replayed() {
				t.Fatalf("first: %d replayed=%v %s", first.Status, first.replayed(), first.Body)
			}
			second, err := f.send(http.MethodPost, "/v1/payment_intents", bearer, "key-37", "application/x-www-form-urlencoded", tt.second)
			if err != nil {
				t.Fatal(err)
			}
			if second.Status != http.StatusOK || !second.replayed() {
				t.Fatalf("second: %d replayed=%v %s", second.Status, second.replayed(), second.Body)
			}
			if string(second.Body) != string(first.Body) {
				t.Errorf("replayed body differs:\n%s\n%s", first.Body, second.Body)
			}
			if n := f.sup.Effects("po-37"); n != 1 {
				t.Errorf("Effects = %d, want 1", n)
			}
		})
	}
}

func TestSameKeyOtherParamsOrEndpointIsAnIdempotencyError(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		path string
		form url.Values
	}{
		{"other amount", "/v1/payment_intents", intent("po-38", "2000")},
		{"other metadata", "/v1/payment_intents", intent("po-39", "1000")},
		{"other endpoint", "/v1/refunds", url.Values{"payment_intent": {"pi_x"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			f := setup(t, stripe.Config{})
			f.mustPost(t, "/v1/payment_intents", "key-38", intent("po-38", "1000"))
			got := f.mustPost(t, tt.path, "key-38", tt.form)
			if got.Status != http.StatusBadRequest || got.err(t).Type != "idempotency_error" {
				t.Fatalf("got %d %s, want 400 idempotency_error", got.Status, got.Body)
			}
			if n := f.sup.Effects("po-38") + f.sup.Effects("po-39"); n != 1 {
				t.Errorf("effects = %d, want 1", n)
			}
		})
	}
}

func TestKeyStillInFlightAnswers409(t *testing.T) {
	t.Parallel()
	t.Run("fault", func(t *testing.T) {
		t.Parallel()
		f := setup(t, stripe.Config{})
		f.sup.Fail(stripe.Fault{Kind: stripe.KeyInUse})
		got := f.mustPost(t, "/v1/payment_intents", "key-40", intent("po-40", "1000"))
		if got.Status != http.StatusConflict || got.err(t).Code != "idempotency_key_in_use" {
			t.Fatalf("got %d %s, want 409 idempotency_key_in_use", got.Status, got.Body)
		}
		if n := f.sup.Effects("po-40"); n != 0 {
			t.Fatalf("Effects = %d after a 409, want 0", n)
		}
		again := f.mustPost(t, "/v1/payment_intents", "key-40", intent("po-40", "1000"))
		if again.Status != http.StatusOK || again.replayed() {
			t.Errorf("retry after 409: %d replayed=%v, want a fresh 200", again.Status, again.replayed())
		}
	})
	t.Run("concurrent repeat", func(t *testing.T) {
		t.Parallel()
		f := setup(t, stripe.Config{})
		f.sup.Fail(stripe.Fault{Kind: stripe.DelayAfterCommit, Delay: 300 * time.Millisecond})
		firstDone := make(chan reply, 1)
		go func() {
			r, _ := f.post("/v1/payment_intents", "key-41", intent("po-41", "1000"))
			firstDone <- r
		}()
		faketest.WaitFor(t, 5*time.Second, func() bool { return f.sup.Effects("po-41") == 1 })
		during := f.mustPost(t, "/v1/payment_intents", "key-41", intent("po-41", "1000"))
		if during.Status != http.StatusConflict || during.err(t).Code != "idempotency_key_in_use" {
			t.Fatalf("repeat while in flight: %d %s, want 409 idempotency_key_in_use", during.Status, during.Body)
		}
		first := <-firstDone
		after := f.mustPost(t, "/v1/payment_intents", "key-41", intent("po-41", "1000"))
		if !after.replayed() || string(after.Body) != string(first.Body) {
			t.Errorf("repeat after the first finished: replayed=%v body %s, want %s", after.replayed(), after.Body, first.Body)
		}
		if n := f.sup.Effects("po-41"); n != 1 {
			t.Errorf("Effects = %d, want 1", n)
		}
	})
}

func TestSearchFindsAPaymentIntentOnlyAfterTheLag(t *testing.T) {
	t.Parallel()
	f := setup(t, stripe.Config{SearchLag: time.Minute})
	created := f.mustPost(t, "/v1/payment_intents", "key-50", intent("al_po-50", "1000")).object(t)
	f.mustPost(t, "/v1/payment_intents", "key-51", intent("al_po-51", "1000"))

	search := func(q string) []any {
		t.Helper()
		got := f.get(t, "/v1/payment_intents/search?query="+url.QueryEscape(q))
		if got.Status != http.StatusOK {
			t.Fatalf("search %q: %d %s", q, got.Status, got.Body)
		}
		res := got.object(t)
		if res["object"] != "search_result" {
			t.Fatalf("search answered %s", got.Body)
		}
		return res["data"].([]any)
	}
	tests := []struct {
		name    string
		advance time.Duration
		query   string
		want    int
	}{
		{"at once", 0, "metadata['reference']:'al_po-50'", 0},
		{"before the lag", 59 * time.Second, "metadata['reference']:'al_po-50'", 0},
		{"after the lag", time.Second, "metadata['reference']:'al_po-50'", 1},
		{"double quotes", 0, `metadata["reference"]:"al_po-50"`, 1},
		{"tokens ignore case", 0, "metadata['reference']:'AL_PO-50'", 1},
		{"another reference", 0, "metadata['reference']:'al_po-52'", 0},
		{"combined with AND", 0, "metadata['reference']:'al_po-50' AND status:'succeeded'", 1},
		{"negated", 0, "-metadata['reference']:'al_po-50'", 1},
	}
	for _, tt := range tests { // sequential: the clock moves
		f.clock.Advance(tt.advance)
		data := search(tt.query)
		if len(data) != tt.want {
			t.Errorf("%s: %d results, want %d", tt.name, len(data), tt.want)
		}
		if tt.want == 1 && tt.name == "after the lag" && data[0].(map[string]any)["id"] != created["id"] {
			t.Errorf("%s: found %v, want %v", tt.name, data[0], created["id"])
		}
	}
	if got := f.get(t, "/v1/payment_intents/search?query="+url.QueryEscape("metadata.reference:'x'")); got.Status != http.StatusBadRequest {
		t.Errorf("an unsupported clause answered %d, want 400", got.Status)
	}
}

func TestLostAndRefusedResponses(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name          string
		fault         stripe.Fault
		wantErr       bool // the client sees no answer
		wantStatus    int
		wantEffects   int // right after the faulty request
		wantRetry     int // the status a resend with the same key gets
		retryReplayed bool
		retryAfter    string
	}{
		{"drop after commit", stripe.Fault{Kind: stripe.DropAfterCommit}, true, 0, 1, http.StatusOK, true, ""},
		{"500 after commit", stripe.Fault{Kind: stripe.Error500AfterCommit}, false, http.StatusInternalServerError, 1, http.StatusInternalServerError, true, ""},
		{"drop before commit", stripe.Fault{Kind: stripe.DropBeforeCommit}, true, 0, 0, http.StatusOK, false, ""},
		{"429 before the key", stripe.Fault{Kind: stripe.RateLimited, RetryAfter: 1500 * time.Millisecond}, false, http.StatusTooManyRequests, 0, http.StatusOK, false, "2"},
		{"429 without Retry-After", stripe.Fault{Kind: stripe.RateLimited}, false, http.StatusTooManyRequests, 0, http.StatusOK, false, ""},
		{"503 before the key", stripe.Fault{Kind: stripe.Unavailable, RetryAfter: time.Second}, false, http.StatusServiceUnavailable, 0, http.StatusOK, false, "1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			f := setup(t, stripe.Config{})
			f.sup.Fail(tt.fault)
			got, err := f.post("/v1/payment_intents", "key-60", intent("po-60", "1000"))
			if (err != nil) != tt.wantErr {
				t.Fatalf("err = %v, want an error: %v", err, tt.wantErr)
			}
			if !tt.wantErr && got.Status != tt.wantStatus {
				t.Fatalf("status = %d, want %d (%s)", got.Status, tt.wantStatus, got.Body)
			}
			if !tt.wantErr && got.Header.Get("Retry-After") != tt.retryAfter {
				t.Errorf("Retry-After = %q, want %q", got.Header.Get("Retry-After"), tt.retryAfter)
			}
			if n := f.sup.Effects("po-60"); n != tt.wantEffects {
				t.Fatalf("Effects = %d, want %d: the fault must say truthfully whether it committed", n, tt.wantEffects)
			}
			retry := f.mustPost(t, "/v1/payment_intents", "key-60", intent("po-60", "1000"))
			if retry.Status != tt.wantRetry || retry.replayed() != tt.retryReplayed {
				t.Errorf("resend: %d replayed=%v, want %d replayed=%v (%s)", retry.Status, retry.replayed(), tt.wantRetry, tt.retryReplayed, retry.Body)
			}
			if n := f.sup.Effects("po-60"); n != 1 {
				t.Errorf("Effects after the resend = %d, want 1", n)
			}
		})
	}
}

func TestRateLimitStrikesBeforeTheIdempotencyLayer(t *testing.T) {
	t.Parallel()
	f := setup(t, stripe.Config{})
	first := f.mustPost(t, "/v1/payment_intents", "key-61", intent("po-61", "1000"))
	f.sup.Fail(stripe.Fault{Kind: stripe.RateLimited})
	if got := f.mustPost(t, "/v1/payment_intents", "key-61", intent("po-61", "1000")); got.Status != http.StatusTooManyRequests {
		t.Fatalf("repeat under a rate limit: %d, want 429", got.Status)
	}
	again := f.mustPost(t, "/v1/payment_intents", "key-61", intent("po-61", "1000"))
	if !again.replayed() || string(again.Body) != string(first.Body) {
		t.Errorf("after the 429 the key still replays: replayed=%v", again.replayed())
	}
}

func TestAKeyPastItsRetentionMakesANewObject(t *testing.T) {
	t.Parallel()
	f := setup(t, stripe.Config{})
	first := f.mustPost(t, "/v1/payment_intents", "key-70", intent("po-70", "1000")).object(t)
	f.clock.Advance(23*time.Hour + 59*time.Minute)
	if got := f.mustPost(t, "/v1/payment_intents", "key-70", intent("po-70", "1000")); !got.replayed() {
		t.Fatalf("within 24h the key must replay")
	}
	f.clock.Advance(time.Minute)
	later := f.mustPost(t, "/v1/payment_intents", "key-70", intent("po-70", "1000"))
	if later.replayed() || later.object(t)["id"] == first["id"] {
		t.Fatalf("after 24h the key must make a new request, got replayed=%v", later.replayed())
	}
	if n := f.sup.Effects("po-70"); n != 2 {
		t.Errorf("Effects = %d, want 2: a resend past the retention duplicates", n)
	}
}

func TestFormEncodingAndValidation(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name        string
		contentType string
		body        string
		wantCode    string
		wantParam   string
	}{
		{"JSON body", "application/json", `{"amount":1000,"currency":"eur"}`, "", ""},
		{"dotted metadata", "application/x-www-form-urlencoded", "amount=1000&currency=eur&metadata.reference=x", "parameter_unknown", "metadata.reference"},
		{"unknown parameter", "application/x-www-form-urlencoded", "amount=1000&currency=eur&colour=red", "parameter_unknown", "colour"},
		{"missing amount", "application/x-www-form-urlencoded", "currency=eur", "parameter_missing", "amount"},
		{"amount not an integer", "application/x-www-form-urlencoded", "amount=10.5&currency=eur", "parameter_invalid_integer", "amount"},
		{"confirm without payment method", "application/x-www-form-urlencoded", "amount=10&currency=eur&confirm=true", "parameter_missing", "payment_method"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			f := setup(t, stripe.Config{})
			got, err := f.send(http.MethodPost, "/v1/payment_intents", bearer, "key-80", tt.contentType, tt.body)
			if err != nil {
				t.Fatal(err)
			}
			if got.Status != http.StatusBadRequest {
				t.Fatalf("status = %d, want 400 (%s)", got.Status, got.Body)
			}
			e := got.err(t)
			if e.Type != "invalid_request_error" || e.Code != tt.wantCode || e.Param != tt.wantParam {
				t.Errorf("error = %+v, want code %q param %q", e, tt.wantCode, tt.wantParam)
			}
			// A request refused by validation stores nothing under its key.
			ok := f.mustPost(t, "/v1/payment_intents", "key-80", intent("po-80", "1000"))
			if ok.Status != http.StatusOK || ok.replayed() {
				t.Errorf("valid request with the same key: %d replayed=%v", ok.Status, ok.replayed())
			}
		})
	}
}

func TestPaymentIntentObjectShape(t *testing.T) {
	t.Parallel()
	f := setup(t, stripe.Config{})
	tests := []struct {
		name       string
		form       url.Values
		wantStatus string
	}{
		{"confirmed", intent("po-90", "1999"), "succeeded"},
		{"not confirmed", url.Values{"amount": {"1999"}, "currency": {"EUR"}, "metadata[reference]": {"po-91"}}, "requires_payment_method"},
		{"manual capture", func() url.Values { v := intent("po-92", "1999"); v.Set("capture_method", "manual"); return v }(), "requires_capture"},
	}
	for _, tt := range tests {
		got := f.mustPost(t, "/v1/payment_intents", "", tt.form)
		if got.Status != http.StatusOK {
			t.Fatalf("%s: %d %s", tt.name, got.Status, got.Body)
		}
		pi := got.object(t)
		if !strings.HasPrefix(pi["id"].(string), "pi_") || pi["object"] != "payment_intent" ||
			pi["amount"] != 1999.0 || pi["currency"] != "eur" || pi["status"] != tt.wantStatus || pi["livemode"] != false {
			t.Errorf("%s: object %s", tt.name, got.Body)
		}
		if md := pi["metadata"].(map[string]any); md["reference"] != tt.form.Get("metadata[reference]") {
			t.Errorf("%s: metadata %v", tt.name, md)
		}
		byID := f.get(t, "/v1/payment_intents/"+pi["id"].(string))
		if byID.Status != http.StatusOK || byID.object(t)["id"] != pi["id"] {
			t.Errorf("%s: retrieve by id: %d %s", tt.name, byID.Status, byID.Body)
		}
	}
	if got := f.get(t, "/v1/payment_intents/pi_missing"); got.Status != http.StatusNotFound || got.err(t).Code != "resource_missing" {
		t.Errorf("missing id: %d %s", got.Status, got.Body)
	}
}

func TestCardDeclinedCreatesAFailedPaymentIntent(t *testing.T) {
	t.Parallel()
	f := setup(t, stripe.Config{})
	f.sup.Fail(stripe.Fault{Kind: stripe.CardDeclined})
	got := f.mustPost(t, "/v1/payment_intents", "key-100", intent("po-100", "1000"))
	if got.Status != http.StatusPaymentRequired {
		t.Fatalf("status = %d, want 402 (%s)", got.Status, got.Body)
	}
	e := got.err(t)
	if e.Type != "card_error" || e.Code != "card_declined" || e.PaymentIntent == nil ||
		e.PaymentIntent.Status != "requires_payment_method" || e.PaymentIntent.Metadata["reference"] != "po-100" {
		t.Fatalf("error = %+v", e)
	}
	if again := f.mustPost(t, "/v1/payment_intents", "key-100", intent("po-100", "1000")); again.Status != http.StatusPaymentRequired || !again.replayed() {
		t.Errorf("the 402 is stored under the key: got %d replayed=%v", again.Status, again.replayed())
	}
	if pis := f.sup.PaymentIntents("po-100"); len(pis) != 1 || pis[0].Status != "requires_payment_method" || pis[0].AmountReceived != 0 {
		t.Errorf("PaymentIntents = %+v, want one unpaid", pis)
	}
}

func TestRefunds(t *testing.T) {
	t.Parallel()
	f := setup(t, stripe.Config{})
	pi := f.mustPost(t, "/v1/payment_intents", "key-110", intent("po-110", "1000")).object(t)
	unpaid := f.mustPost(t, "/v1/payment_intents", "", url.Values{"amount": {"1000"}, "currency": {"eur"}}).object(t)
	refund := func(ref string, v url.Values) reply {
		v.Set("metadata[reference]", ref)
		return f.mustPost(t, "/v1/refunds", "key-"+ref, v)
	}
	tests := []struct {
		name       string
		ref        string
		form       url.Values
		wantStatus int
		wantCode   string
	}{
		{"partial", "rf-1", url.Values{"payment_intent": {pi["id"].(string)}, "amount": {"300"}}, http.StatusOK, ""},
		{"more than is left", "rf-2", url.Values{"payment_intent": {pi["id"].(string)}, "amount": {"800"}}, http.StatusBadRequest, "amount_too_large"},
		{"the rest", "rf-3", url.Values{"payment_intent": {pi["id"].(string)}}, http.StatusOK, ""},
		{"nothing left", "rf-4", url.Values{"payment_intent": {pi["id"].(string)}}, http.StatusBadRequest, "charge_already_refunded"},
		{"unknown payment intent", "rf-5", url.Values{"payment_intent": {"pi_nope"}}, http.StatusBadRequest, "resource_missing"},
		{"unpaid payment intent", "rf-6", url.Values{"payment_intent": {unpaid["id"].(string)}}, http.StatusBadRequest, ""},
	}
	for _, tt := range tests { // sequential: each refund changes what is left
		got := refund(tt.ref, tt.form)
		if got.Status != tt.wantStatus {
			t.Fatalf("%s: status %d, want %d (%s)", tt.name, got.Status, tt.wantStatus, got.Body)
		}
		if tt.wantStatus != http.StatusOK {
			if e := got.err(t); e.Code != tt.wantCode {
				t.Errorf("%s: code %q, want %q", tt.name, e.Code, tt.wantCode)
			}
			if n := f.sup.Effects(tt.ref); n != 0 {
				t.Errorf("%s: a refused refund made %d effects", tt.name, n)
			}
			continue
		}
		re := got.object(t)
		if !strings.HasPrefix(re["id"].(string), "re_") || re["object"] != "refund" || re["status"] != "succeeded" || re["payment_intent"] != pi["id"] {
			t.Errorf("%s: refund %s", tt.name, got.Body)
		}
		if n := f.sup.Effects(tt.ref); n != 1 {
			t.Errorf("%s: Effects = %d, want 1", tt.name, n)
		}
	}
	listed := f.get(t, "/v1/refunds?payment_intent="+pi["id"].(string)).object(t)
	if listed["object"] != "list" || len(listed["data"].([]any)) != 2 {
		t.Errorf("list of refunds (consistent, no lag): %v", listed)
	}
}

// The PaymentIntents list is newest first, bounded by created[gte] and
// created[lt], and paged by starting_after until has_more is false; an
// unknown starting_after is a 400, as an unknown id is.
func TestListPagesNewestFirstWithinCreatedBounds(t *testing.T) {
	t.Parallel()
	f := setup(t, stripe.Config{})
	before := f.clock.Now().Unix()
	f.mustPost(t, "/v1/payment_intents", "", intent("al_old", "100"))
	f.clock.Advance(time.Minute)
	from := f.clock.Now().Unix()
	var ids []string
	for i := range 3 {
		ids = append(ids, f.mustPost(t, "/v1/payment_intents", "", intent(fmt.Sprintf("al_%d", i), "100")).object(t)["id"].(string))
		f.clock.Advance(time.Second)
	}
	to := f.clock.Now().Unix()
	type page struct {
		Data []struct {
			ID string `json:"id"`
		} `json:"data"`
		HasMore bool `json:"has_more"`
	}
	var first, second page
	window := fmt.Sprintf("/v1/payment_intents?created[gte]=%d&created[lt]=%d&limit=2", from, to)
	f.get(t, window).Decode(t, &first)
	if len(first.Data) != 2 || first.Data[0].ID != ids[2] || first.Data[1].ID != ids[1] || !first.HasMore {
		t.Fatalf("first page = %+v, want %s and %s and more to come", first, ids[2], ids[1])
	}
	f.get(t, window+"&starting_after="+first.Data[1].ID).Decode(t, &second)
	if len(second.Data) != 1 || second.Data[0].ID != ids[0] || second.HasMore {
		t.Fatalf("second page = %+v, want %s alone (al_old, made at %d, is before the window)", second, ids[0], before)
	}
	if r := f.get(t, window+"&starting_after=pi_nobody"); r.Status != http.StatusBadRequest {
		t.Fatalf("an unknown starting_after answered %d, want 400", r.Status)
	}
}
