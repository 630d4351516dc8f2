package stripe_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"

	"github.com/actledger/actledger/internal/mocksupplier/stripe"
)

// A lost response: the fake creates the PaymentIntent and closes the connection. The client
// cannot tell what happened; a resend with the same Idempotency-Key gets the stored answer, and
// the fake's count says what is true.
func ExampleServer() {
	sup := stripe.New(stripe.Config{})
	defer sup.Close()
	ts := httptest.NewServer(sup)
	defer ts.Close()
	client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}

	sup.Fail(stripe.Fault{Kind: stripe.DropAfterCommit})
	form := url.Values{
		"amount": {"1999"}, "currency": {"eur"}, "payment_method": {"pm_card_visa"}, "confirm": {"true"},
		"metadata[reference]": {"al_order-37"},
	}
	send := func() (*http.Response, error) {
		req, _ := http.NewRequest(http.MethodPost, ts.URL+"/v1/payment_intents", strings.NewReader(form.Encode()))
		req.Header.Set("Authorization", "Bearer "+stripe.DefaultAPIKey)
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.Header.Set("Idempotency-Key", "al_order-37")
		return client.Do(req)
	}

	_, err := send()
	fmt.Println("first attempt failed:", err != nil)
	fmt.Println("payment intents for al_order-37:", sup.Effects("al_order-37"))

	resp, err := send()
	if err != nil {
		panic(err)
	}
	resp.Body.Close()
	fmt.Println("resend:", resp.StatusCode, "Idempotent-Replayed:", resp.Header.Get("Idempotent-Replayed"))
	fmt.Println("payment intents for al_order-37:", sup.Effects("al_order-37"))
	// Output:
	// first attempt failed: true
	// payment intents for al_order-37: 1
	// resend: 200 Idempotent-Replayed: true
	// payment intents for al_order-37: 1
}
