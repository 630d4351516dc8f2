package provider_test

import (
	"fmt"
	"net/http"
	"time"

	"github.com/actledger/actledger/provider"
)

// Parse reads the providers file; an action resolves to its provider's validated config with
// every default filled.
func ExampleParse() {
	reg, err := provider.Parse([]byte(`
providers:
  acme:
    base_url: https://api.acme.example
    create: {path: /v1/orders}
    idempotency: {header: Idempotency-Key, retention: 24h}
actions:
  supplier.create_order: {provider: acme}
`))
	if err != nil {
		fmt.Println(err)
		return
	}
	cfg, _ := reg.ForAction("supplier.create_order")
	fmt.Println(cfg.Name, cfg.Create.Method, cfg.Timeout, cfg.ReferenceParam, cfg.Retry.MaxAttempts)
	// Output: acme POST 10s reference 5
}

// Classify is the contract's response table; the dispatcher maps the class to a state.
func ExampleClassify() {
	now := time.Now()
	for _, status := range []int{201, 422, 409, 429, 500} {
		class, _, _ := provider.Classify(status, true, http.Header{}, now)
		fmt.Println(status, class)
	}
	// Output:
	// 201 succeeded
	// 422 rejected
	// 409 unknown
	// 429 not_executed
	// 500 unknown
}
