package postmark_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"

	"github.com/actledger/actledger/internal/mocksupplier/postmark"
)

// A lost response at a supplier with no idempotency key: Postmark accepts the email and the
// answer never arrives. A blind resend mails the customer twice; only the reference in Metadata
// lets a search, or Effects, tell.
func ExampleServer() {
	pm := postmark.New(postmark.Config{})
	ts := httptest.NewServer(pm)
	defer ts.Close()
	client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}

	pm.SetFaults("al_37", postmark.Fault{Kind: postmark.DropAfterCommit})
	send := func() (*http.Response, error) {
		req, _ := http.NewRequest(http.MethodPost, ts.URL+"/email", strings.NewReader(
			`{"From":"support@acme.example","To":"jane@example.com","Subject":"Order 37","TextBody":"Shipped.","Metadata":{"actledger_reference":"al_37"}}`))
		req.Header.Set("X-Postmark-Server-Token", postmark.DefaultServerToken)
		req.Header.Set("Accept", "application/json")
		return client.Do(req)
	}

	_, err := send()
	fmt.Println("first attempt failed:", err != nil)
	fmt.Println("emails for al_37:", pm.Effects("al_37"))

	resp, err := send()
	if err != nil {
		panic(err)
	}
	resp.Body.Close()
	fmt.Println("blind resend:", resp.StatusCode)
	fmt.Println("emails for al_37:", pm.Effects("al_37"))
	// Output:
	// first attempt failed: true
	// emails for al_37: 1
	// blind resend: 200
	// emails for al_37: 2
}
