package action

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/actledger/actledger/internal/request"
)

// keyedAction is a providers file whose action declares the business key
// %s (a YAML scalar).
func keyedAction(t *testing.T, key string) *Contract {
	t.Helper()
	reg := mustParse(t, `providers:
  acme: {base_url: "http://127.0.0.1:9100", account: acct_123, environment: test, create: {path: /v1/orders}}
actions:
  supplier.create_order:
    provider: acme
    key: `+key+"\n")
	a, ok := reg["supplier.create_order"]
	if !ok {
		t.Fatal("action supplier.create_order not found")
	}
	return a
}

func TestBusinessKeyIsTheSameForTheSameIntention(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, key, params, tenant, want string
	}{
		{"string param", `'"order-" + params.order_id'`, `{"order_id":"A-7","amount":100}`, "acme", "order-A-7"},
		{"number param", `'"po-" + string(params.purchase_order)'`, `{"purchase_order":37}`, "acme", "po-37"},
		{"number written as a decimal", `'"po-" + string(params.purchase_order)'`, `{"purchase_order":37.0}`, "acme", "po-37"},
		{"number in exponent form", `'"po-" + string(params.purchase_order)'`, `{"purchase_order":3.7e1}`, "acme", "po-37"},
		{"fraction", `'"po-" + string(params.purchase_order)'`, `{"purchase_order":37.5}`, "acme", "po-37.5"},
		{"nested param", `'"case-" + params.case.id'`, `{"case":{"id":"C-1"}}`, "acme", "case-C-1"},
		{"index notation", `'params["order id"]'`, `{"order id":"A-1"}`, "acme", "A-1"},
		{"tenant", `'tenant + "/" + params.order_id'`, `{"order_id":"A-1"}`, "globex", "globex/A-1"},
		{"normalised text", `'params.order_id.trim().lowerAscii()'`, `{"order_id":"  A-1 "}`, "acme", "a-1"},
		{"optional param", `'has(params.ref) ? params.ref : "po-" + string(params.po)'`, `{"po":4}`, "acme", "po-4"},
	} {
		a := keyedAction(t, tc.key)
		got, ok, err := a.BusinessKey(context.Background(), []byte(tc.params), tc.tenant)
		if got != tc.want || !ok || err != nil {
			t.Errorf("%s: BusinessKey(%s) = %q, %v, %v; want %q", tc.name, tc.params, got, ok, err, tc.want)
		}
	}
}

func TestBusinessKeyRefusesParamsThatGiveNoKeyNamingTheParam(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("x", request.MaxKeyLength+1)
	for _, tc := range []struct {
		name, key, params, path, says string
	}{
		{"missing param", `'"order-" + params.order_id'`, `{"amount":100}`, "/order_id", "no such key: order_id"},
		{"missing nested param", `'"case-" + params.case.id'`, `{"case":{"number":"C-1"}}`, "/case/id", "no such key: id"},
		{"missing parent", `'"case-" + params.case.id'`, `{}`, "/case", "no such key: case"},
		{"the missing one of two", `'params.a + "-" + params.b'`, `{"a":"x"}`, "/b", "no such key: b"},
		{"wrong type", `'"order-" + params.order_id'`, `{"order_id":7}`, "/order_id", "no such overload"},
		{"not a string", `'params.order_id'`, `{"order_id":7}`, "/order_id", "must be a string"},
		{"nested, not a string", `'params.case.id'`, `{"case":{"id":7}}`, "/case/id", "must be a string"},
		{"empty", `'params.order_id'`, `{"order_id":""}`, "/order_id", "must not be empty"},
		{"too long", `'params.order_id'`, `{"order_id":"` + long + `"}`, "/order_id", "at most 256 characters"},
		{"invisible", `'"order-" + params.order_id'`, `{"order_id":"37\u202e"}`, "/order_id", "must be visible text"},
		{"a line break", `'"order-" + params.order_id'`, `{"order_id":"37\n  params: {}"}`, "/order_id", "must be visible text"},
		{"over the cost limit", `'params.items.map(a, params.items.map(b, params.items.map(c, a + b + c))).size() > 0 ? "k" : "j"'`,
			`{"items":[` + strings.Repeat("1,", 199) + `1]}`, "/items", "cost"},
	} {
		a := keyedAction(t, tc.key)
		got, ok, err := a.BusinessKey(context.Background(), []byte(tc.params), "acme")
		var pe *ParamsError
		switch {
		case !errors.As(err, &pe):
			t.Errorf("%s: BusinessKey = %q, %v, %v; want a *ParamsError", tc.name, got, ok, err)
		case pe.Path != tc.path || !strings.Contains(err.Error(), tc.says) || !strings.Contains(err.Error(), "business key"):
			t.Errorf("%s: error %q (path %q); want path %q, saying %q", tc.name, err, pe.Path, tc.path, tc.says)
		case got != "" || !ok:
			t.Errorf("%s: = %q, %v; want no key from an action that declares one", tc.name, got, ok)
		}
	}
}

func TestOperationKeyIsTheBusinessKeyAndKeepsTheCallersAsClientKey(t *testing.T) {
	t.Parallel()
	keyed := keyedAction(t, `'"po-" + string(params.po)'`)
	plain := &Contract{Name: "supplier.create_order"}
	for _, tc := range []struct {
		name                string
		action              *Contract
		callerKey           string
		wantKey, wantClient string
	}{
		{"declared, caller key given", keyed, "tool-call-1", "po-37", "tool-call-1"},
		{"declared, no caller key", keyed, "", "po-37", ""},
		{"not declared", plain, "po-37-by-caller", "po-37-by-caller", ""},
		{"not declared, no caller key", plain, "", "", ""},
	} {
		key, client, err := tc.action.OperationKey(context.Background(), []byte(`{"po":37}`), "acme", tc.callerKey)
		if key != tc.wantKey || client != tc.wantClient || err != nil {
			t.Errorf("%s: = %q, %q, %v; want %q, %q", tc.name, key, client, err, tc.wantKey, tc.wantClient)
		}
	}
	if _, ok, err := plain.BusinessKey(context.Background(), []byte(`{}`), "acme"); ok || err != nil || plain.HasBusinessKey() {
		t.Errorf("an action without key: ok %v, err %v; want none", ok, err)
	}
}

func TestBadBusinessKeyStopsTheLoadNamingTheActionAndKey(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ name, key, says string }{
		{"does not compile", `'"po-" +'`, "does not compile"},
		{"a number", `'params.po + 1'`, "must be a string"},
		{"a bool", `'has(params.po)'`, "must be a string"},
		{"a variable keys cannot read", `'action + params.po'`, "does not compile"},
		{"empty", `""`, "must not be empty"},
	} {
		_, err := parse(`providers:
  acme: {base_url: "http://127.0.0.1:9100", account: acct_123, environment: test, create: {path: /v1/orders}}
actions:
  supplier.create_order: {provider: acme, key: ` + tc.key + `}
`)
		var fe *FieldError
		if !errors.As(err, &fe) || !strings.Contains(err.Error(), `action "supplier.create_order": key: `) || !strings.Contains(err.Error(), tc.says) {
			t.Errorf("%s: err = %v, want one naming action supplier.create_order, field key, saying %q", tc.name, err, tc.says)
		}
	}
}

// The business key example of docs/contract.md ("Providers file") is a
// valid action contract and keys purchase order 37 as po-37.
func TestContractDocBusinessKeyExampleParses(t *testing.T) {
	t.Parallel()
	doc, err := os.ReadFile(filepath.Join("..", "docs", "contract.md"))
	if err != nil {
		t.Fatal(err)
	}
	var example string
	for _, block := range strings.Split(string(doc), "```yaml\n")[1:] {
		if block, _, _ = strings.Cut(block, "```"); strings.HasPrefix(block, "actions:\n") && strings.Contains(block, "    key: ") {
			example = block
		}
	}
	if example == "" {
		t.Fatal("docs/contract.md holds no ```yaml block of actions with a key")
	}
	reg := mustParse(t, "providers:\n  acme: {base_url: \"http://127.0.0.1:9100\", account: a, environment: test, create: {path: /v1/orders}}\n"+example)
	a, ok := reg["supplier.create_order"]
	if !ok {
		t.Fatal("the example has no supplier.create_order")
	}
	params := []byte(`{"purchase_order":37,"sku":"A-1","qty":3}`)
	if key, _, err := a.BusinessKey(context.Background(), params, "acme"); key != "po-37" || err != nil || a.CheckParams(params) != nil {
		t.Errorf("key %q, %v; schema %v; want po-37 for params the schema accepts", key, err, a.CheckParams(params))
	}
}
