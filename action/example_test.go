package action_test

import (
	"context"
	"fmt"

	"github.com/actledger/actledger/action"
)

// A contract checks params against its JSON Schema and lets its CEL policy
// approve small requests; anything else waits for a person.
func ExampleContract_AutoApprove() {
	contracts, errs := action.Compile(map[string]action.Contract{
		"supplier.create_order": {
			Provider: "acme",
			ParamsSchema: map[string]any{"type": "object", "required": []any{"sku", "qty"},
				"properties": map[string]any{"qty": map[string]any{"type": "integer", "minimum": 1}}},
			Approval: action.ApprovalPolicy{AutoApprove: "params.qty <= 10", PolicyVersion: "2026-11"},
		},
	}, func(provider string) bool { return provider == "acme" })
	if len(errs) > 0 {
		fmt.Println(errs)
		return
	}
	contract := contracts["supplier.create_order"]
	fmt.Println(contract.CheckParams([]byte(`{"sku":"A-1","qty":0}`)))
	for _, params := range []string{`{"sku":"A-1","qty":3}`, `{"sku":"A-1","qty":30}`} {
		approved, err := contract.AutoApprove(context.Background(), []byte(params), "acme-corp")
		fmt.Println(params, approved, err, contract.PolicyApprover())
	}
	// Output:
	// params/qty: minimum: got 0, want 1
	// {"sku":"A-1","qty":3} true <nil> policy:2026-11
	// {"sku":"A-1","qty":30} false <nil> policy:2026-11
}
