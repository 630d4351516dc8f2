package mocksupplier_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"

	"github.com/actledger/actledger/internal/mocksupplier"
)

// A lost response: the supplier commits the order and closes the connection. The client cannot
// tell what happened; the supplier's count can.
func ExampleServer() {
	sup := mocksupplier.New(mocksupplier.Config{})
	defer sup.Close()
	ts := httptest.NewServer(sup)
	defer ts.Close()
	client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}

	sup.SetFaults("po-37", mocksupplier.Fault{Kind: mocksupplier.DropAfterCommit})
	send := func() (*http.Response, error) {
		req, _ := http.NewRequest(http.MethodPost, ts.URL+"/v1/orders", strings.NewReader(`{"client_reference":"po-37","sku":"bolt"}`))
		req.Header.Set("Idempotency-Key", "po-37")
		return client.Do(req)
	}

	_, err := send()
	fmt.Println("first attempt failed:", err != nil)
	fmt.Println("orders for po-37:", sup.Orders("po-37"))

	resp, err := send() // same key: the stored answer, no second order
	if err != nil {
		panic(err)
	}
	resp.Body.Close()
	fmt.Println("retry:", resp.StatusCode, "replayed:", resp.Header.Get("Idempotent-Replayed"))
	fmt.Println("orders for po-37:", sup.Orders("po-37"))
	// Output:
	// first attempt failed: true
	// orders for po-37: 1
	// retry: 201 replayed: true
	// orders for po-37: 1
}
