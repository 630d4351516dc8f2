package zendesk_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"

	"github.com/actledger/actledger/internal/mocksupplier/zendesk"
)

// A lost response: the fake creates the ticket and closes the connection. A resend with the same
// Idempotency-Key gets the stored answer (x-idempotency-lookup: hit); the fake's count says what
// is true.
func ExampleServer() {
	sup := zendesk.New(zendesk.Config{})
	defer sup.Close()
	ts := httptest.NewServer(sup)
	defer ts.Close()
	client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}

	sup.Fail(zendesk.Fault{Kind: zendesk.DropAfterCommit})
	body := `{"ticket":{"subject":"Printer on fire","comment":{"body":"Smoke."},"external_id":"al_ticket-7"}}`
	send := func() (*http.Response, error) {
		req, _ := http.NewRequest(http.MethodPost, ts.URL+"/api/v2/tickets.json", strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+zendesk.DefaultOAuthToken)
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Idempotency-Key", "al_ticket-7")
		return client.Do(req)
	}

	_, err := send()
	fmt.Println("first attempt failed:", err != nil)
	fmt.Println("tickets for al_ticket-7:", sup.Effects("al_ticket-7"))

	resp, err := send()
	if err != nil {
		panic(err)
	}
	resp.Body.Close()
	fmt.Println("resend:", resp.StatusCode, "x-idempotency-lookup:", resp.Header.Get("X-Idempotency-Lookup"))
	fmt.Println("tickets for al_ticket-7:", sup.Effects("al_ticket-7"))
	// Output:
	// first attempt failed: true
	// tickets for al_ticket-7: 1
	// resend: 201 x-idempotency-lookup: hit
	// tickets for al_ticket-7: 1
}
