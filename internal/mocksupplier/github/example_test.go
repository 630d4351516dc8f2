package github_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"

	"github.com/actledger/actledger/internal/mocksupplier/github"
)

// A lost response at a supplier with no idempotency key: GitHub creates the issue and the answer
// never arrives. A blind resend opens a second issue; only the reference in the body lets a
// lookup, or Effects, tell.
func ExampleServer() {
	gh := github.New(github.Config{})
	defer gh.Close()
	ts := httptest.NewServer(gh)
	defer ts.Close()
	client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}

	gh.SetFaults("al_37", github.Fault{Kind: github.DropAfterCommit})
	send := func() (*http.Response, error) {
		req, _ := http.NewRequest(http.MethodPost, ts.URL+"/repos/acme/support/issues",
			strings.NewReader(`{"title":"Order 37 arrived damaged","body":"actledger reference: al_37"}`))
		req.Header.Set("Authorization", "Bearer "+github.DefaultToken)
		return client.Do(req)
	}

	_, err := send()
	fmt.Println("first attempt failed:", err != nil)
	fmt.Println("issues for al_37:", gh.Effects("al_37"))

	resp, err := send()
	if err != nil {
		panic(err)
	}
	resp.Body.Close()
	fmt.Println("blind resend:", resp.StatusCode)
	fmt.Println("issues for al_37:", gh.Effects("al_37"))
	// Output:
	// first attempt failed: true
	// issues for al_37: 1
	// blind resend: 201
	// issues for al_37: 2
}
