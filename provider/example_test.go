package provider_test

import (
	"context"
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

// An action's contract checks params against its JSON Schema and lets its
// CEL policy approve small requests; anything else waits for a person.
func ExampleAction_AutoApprove() {
	reg, err := provider.Parse([]byte(`
providers:
  acme: {base_url: "https://api.acme.example", create: {path: /v1/orders}}
actions:
  supplier.create_order:
    provider: acme
    params_schema: {type: object, required: [sku, qty], properties: {qty: {type: integer, minimum: 1}}}
    approval: {auto_approve: "params.qty <= 10", policy_version: "2026-11"}
`))
	if err != nil {
		fmt.Println(err)
		return
	}
	action, _ := reg.Action("supplier.create_order")
	fmt.Println(action.CheckParams([]byte(`{"sku":"A-1","qty":0}`)))
	for _, params := range []string{`{"sku":"A-1","qty":3}`, `{"sku":"A-1","qty":30}`} {
		approved, err := action.AutoApprove(context.Background(), []byte(params), "acme-corp")
		fmt.Println(params, approved, err, action.PolicyApprover())
	}
	// Output:
	// params/qty: minimum: got 0, want 1
	// {"sku":"A-1","qty":3} true <nil> policy:2026-11
	// {"sku":"A-1","qty":30} false <nil> policy:2026-11
}
