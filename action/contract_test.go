package action

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"
)

// contractExample is the action contract of docs/contract.md ("Providers file").
const contractExample = `providers:
  acme: {base_url: "http://127.0.0.1:9100", account: acct_123, environment: test, create: {path: /v1/orders}}
actions:
  supplier.create_order:
    provider: acme
    description: Order goods from the supplier (an MCP tool's and the console's description).
    params_schema:                       # JSON Schema 2020-12; a violation → 422 naming the field
      type: object
      required: [sku, qty]
      properties: {sku: {type: string}, qty: {type: integer, minimum: 1}}
      additionalProperties: false
    approval:
      request_ttl: 24h                   # how long a proposal may wait for a decision
      approval_ttl: 1h                   # how long a granted approval stays valid for dispatch
      auto_approve: "params.qty <= 10"   # optional CEL expression over params, tenant, action
      policy_version: "2026-11"          # recorded on every approval, person or policy
  supplier.short_form: {provider: acme}
`

// parse reads the actions: section of a providers file as the file's
// loader does: decoded strictly, converted, then compiled, each action
// bound to a provider the file's providers: section names.
func parse(doc string) (map[string]*Contract, error) {
	var file struct {
		Providers map[string]yaml.Node `yaml:"providers"`
		Actions   Section              `yaml:"actions"`
	}
	dec := yaml.NewDecoder(strings.NewReader(doc))
	dec.KnownFields(true)
	if err := dec.Decode(&file); err != nil {
		return nil, err
	}
	contracts, convErrs := file.Actions.Contracts()
	compiled, compileErrs := Compile(contracts, func(provider string) bool {
		_, ok := file.Providers[provider]
		return ok
	})
	var errs []error
	for _, e := range append(convErrs, compileErrs...) {
		errs = append(errs, e)
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return compiled, nil
}

func mustParse(t *testing.T, doc string) map[string]*Contract {
	t.Helper()
	contracts, err := parse(doc)
	if err != nil {
		t.Fatalf("parse: %v", err)
	}
	return contracts
}

func TestParseAcceptsTheActionContractExample(t *testing.T) {
	t.Parallel()
	reg := mustParse(t, contractExample)
	a, ok := reg["supplier.create_order"]
	if !ok {
		t.Fatal("Action(supplier.create_order) not found")
	}
	if a.Provider != "acme" || !strings.HasPrefix(a.Description, "Order goods") ||
		a.Approval.RequestTTL != 24*time.Hour || a.Approval.ApprovalTTL != time.Hour ||
		a.Approval.PolicyVersion != "2026-11" || a.PolicyApprover() != "policy:2026-11" || !a.HasPolicy() {
		t.Errorf("contract = %+v", a)
	}
	short, ok := reg["supplier.short_form"]
	if !ok || short.HasPolicy() || short.Approval.RequestTTL != DefaultRequestTTL ||
		short.Approval.ApprovalTTL != DefaultApprovalTTL || short.Approval.PolicyVersion != DefaultPolicyVersion {
		t.Errorf("short form = %+v, want defaults and no policy", short)
	}
	if err := short.CheckParams([]byte(`{"anything":[1,2]}`)); err != nil {
		t.Errorf("short form refuses params: %v", err)
	}
}

func TestCheckParamsNamesTheFailingField(t *testing.T) {
	t.Parallel()
	a, _ := mustParse(t, contractExample)["supplier.create_order"]
	for _, tc := range []struct {
		params, path string
	}{
		{`{"sku":"A-1","qty":3}`, ""},
		{`{"sku":"A-1","qty":0}`, "/qty"},
		{`{"sku":"A-1","qty":1.5}`, "/qty"},
		{`{"sku":7,"qty":1}`, "/sku"},
		{`{"sku":"A-1"}`, "-"},
		{`{"sku":"A-1","qty":1,"colour":"red"}`, "-"},
	} {
		err := a.CheckParams([]byte(tc.params))
		var pe *ParamsError
		switch {
		case tc.path == "" && err != nil:
			t.Errorf("%s: refused: %v", tc.params, err)
		case tc.path == "":
		case !errors.As(err, &pe):
			t.Errorf("%s: err = %v, want a *ParamsError", tc.params, err)
		case tc.path != "-" && pe.Path != tc.path:
			t.Errorf("%s: path %q, want %q (%v)", tc.params, pe.Path, tc.path, err)
		}
	}
}

func TestAutoApproveEvaluatesThePolicyAndNeverApprovesOnError(t *testing.T) {
	t.Parallel()
	a, _ := mustParse(t, strings.Replace(contractExample, `"params.qty <= 10"`,
		`"params.qty <= 10 && tenant == 'acme' && action == 'supplier.create_order'"`, 1))["supplier.create_order"]
	for _, tc := range []struct {
		params, tenant string
		want, err      bool
	}{
		{`{"sku":"A","qty":10}`, "acme", true, false},
		{`{"sku":"A","qty":10.0}`, "acme", true, false},
		{`{"sku":"A","qty":11}`, "acme", false, false},
		{`{"sku":"A","qty":1}`, "other", false, false},
		{`{"sku":"A"}`, "acme", false, true},
		{`{"sku":"A","qty":"ten"}`, "acme", false, true},
	} {
		got, err := a.AutoApprove(context.Background(), []byte(tc.params), tc.tenant)
		if got != tc.want || (err != nil) != tc.err {
			t.Errorf("%s (%s) = %v, %v; want %v, error %v", tc.params, tc.tenant, got, err, tc.want, tc.err)
		}
	}
}

func TestAutoApproveStopsAtTheCostLimit(t *testing.T) {
	t.Parallel()
	doc := strings.Replace(contractExample, `"params.qty <= 10"`,
		`"params.items.all(a, params.items.all(b, params.items.all(c, a + b + c >= 0)))"`, 1)
	doc = strings.Replace(doc, "required: [sku, qty]", "required: []", 1)
	doc = strings.Replace(doc, "additionalProperties: false", "additionalProperties: true", 1)
	a, _ := mustParse(t, doc)["supplier.create_order"]
	items := strings.Repeat("1,", 199) + "1"
	got, err := a.AutoApprove(context.Background(), []byte(`{"items":[`+items+`]}`), "acme")
	if got || err == nil || !strings.Contains(err.Error(), "cost") {
		t.Errorf("= %v, %v; want false and a cost limit error", got, err)
	}
}

func TestBadActionContractStopsTheStartNamingTheAction(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, from, to, field string
	}{
		{"schema", "type: object\n", "type: objekt\n", "params_schema"},
		{"policy does not compile", `"params.qty <= 10"`, `"params.qty <="`, "approval.auto_approve"},
		{"policy not bool", `"params.qty <= 10"`, `"params.qty + 1"`, "approval.auto_approve"},
		{"unknown variable", `"params.qty <= 10"`, `"user == 'x'"`, "approval.auto_approve"},
		{"policy without version", `policy_version: "2026-11"`, `description2: x`, "approval.policy_version"},
		{"bad ttl", "request_ttl: 24h", "request_ttl: 0s", "approval.request_ttl"},
	} {
		doc := strings.Replace(contractExample, tc.from, tc.to, 1)
		if tc.name == "policy without version" {
			doc = strings.Replace(contractExample, `      policy_version: "2026-11"          # recorded on every approval, person or policy`+"\n", "", 1)
		}
		_, err := parse(doc)
		var fe *FieldError
		if !errors.As(err, &fe) || !strings.Contains(err.Error(), `action "supplier.create_order": `+tc.field) {
			t.Errorf("%s: err = %v, want one naming action supplier.create_order and %s", tc.name, err, tc.field)
		}
	}
}

// A params_schema may name its parts in $defs and refer to them with a
// local $ref, as JSON Schema 2020-12 allows; the reference resolves
// inside the action's own schema.
func TestParamsSchemaWithLocalRefsCompilesAndChecks(t *testing.T) {
	t.Parallel()
	reg := mustParse(t, `providers:
  acme: {base_url: "http://127.0.0.1:9100", account: acct_123, environment: test, create: {path: /v1/orders}}
actions:
  supplier.create_order:
    provider: acme
    params_schema:
      type: object
      required: [item]
      properties: {item: {$ref: "#/$defs/item"}}
      $defs: {item: {type: object, required: [sku], properties: {sku: {type: string}}}}
`)
	a, _ := reg["supplier.create_order"]
	if err := a.CheckParams([]byte(`{"item":{"sku":"A-1"}}`)); err != nil {
		t.Errorf("params that fit refused: %v", err)
	}
	var pe *ParamsError
	if err := a.CheckParams([]byte(`{"item":{"sku":7}}`)); !errors.As(err, &pe) || pe.Path != "/item/sku" {
		t.Errorf("params against the referenced part: %v, want a *ParamsError at /item/sku", err)
	}
}

// Every action is one MCP tool named after it with "." → "_": two actions
// that would share a tool name are refused, or one of them would have no
// tool.
func TestActionsThatWouldShareAToolNameAreRefused(t *testing.T) {
	t.Parallel()
	_, err := parse(`providers:
  acme: {base_url: "http://127.0.0.1:9100", account: acct_123, environment: test, create: {path: /v1/orders}}
actions:
  supplier.create_order: {provider: acme}
  supplier_create.order: {provider: acme}
`)
	if err == nil || !strings.Contains(err.Error(), "supplier_create_order") {
		t.Errorf("parse = %v, want a refusal naming the shared tool name supplier_create_order", err)
	}
}
