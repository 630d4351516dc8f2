package provider

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// The providers file example of docs/contract.md, the repository's
// contract for its users, is a valid providers file.
func TestContractDocExampleParses(t *testing.T) {
	t.Parallel()
	doc, err := os.ReadFile(filepath.Join("..", "docs", "contract.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(doc), "```yaml\nproviders:\n")
	example, _, closed := strings.Cut(rest, "```")
	if !ok || !closed {
		t.Fatal("docs/contract.md holds no ```yaml block starting with providers:")
	}
	reg := mustParse(t, "providers:\n"+example)
	a, ok := reg.Action("supplier.create_order")
	if !ok || a.Provider != "acme" || !a.HasPolicy() || a.Approval.PolicyVersion != "2026-11" {
		t.Fatalf("supplier.create_order: %+v, %v", a, ok)
	}
	pc, ok := reg.Provider("acme")
	if !ok || pc.Account != "acct_123" || pc.Environment != "test" || pc.Tenant != "acme-corp" {
		t.Fatalf("acme: %+v, %v", pc, ok)
	}
}

// The recipes of docs/providers declare business keys; their providers
// files load, and each key makes the identity the recipe promises.
func TestRecipesBusinessKeysLoadAndDeriveTheirKeys(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		recipe, action, params, want string
	}{
		{"stripe.md", "payments.create_intent", `{"order_id":"6735","amount":2000,"currency":"eur","customer":"cus_1","payment_method":"pm_1"}`, "order-6735"},
		{"stripe.md", "payments.refund", `{"refund_request_id":"rr-9","payment_intent":"pi_1"}`, "refund-rr-9"},
		{"zendesk.md", "support.open_ticket", `{"case_id":"81","subject":"s","body":"b"}`, "case-81"},
	} {
		doc, err := os.ReadFile(filepath.Join("..", "docs", "providers", tc.recipe))
		if err != nil {
			t.Fatal(err)
		}
		_, rest, ok := strings.Cut(string(doc), "```yaml\n")
		file, _, closed := strings.Cut(rest, "```")
		if !ok || !closed {
			t.Fatalf("%s holds no ```yaml block", tc.recipe)
		}
		// Every credential and secret the file names is set, to a value
		// each scheme accepts.
		reg, err := ParseEnv([]byte(file), func(string) string { return "whsec_c2VjcmV0" })
		if err != nil {
			t.Fatalf("%s: %v", tc.recipe, err)
		}
		a, ok := reg.Action(tc.action)
		if !ok || !a.HasBusinessKey() {
			t.Fatalf("%s: action %s missing or without a business key", tc.recipe, tc.action)
		}
		if err := a.CheckParams([]byte(tc.params)); err != nil {
			t.Fatalf("%s: the test's params break %s's schema: %v", tc.recipe, tc.action, err)
		}
		if got, _, err := a.BusinessKey(context.Background(), []byte(tc.params), "acme-corp"); got != tc.want || err != nil {
			t.Errorf("%s %s: key %q, %v; want %q", tc.recipe, tc.action, got, err, tc.want)
		}
	}
}

// TestLongestIdempotencyRetentionIsTheLongestOfTheProvidersThatHonourKeys:
// how long a pruned key's tombstone must be kept (retention) is the
// longest time any supplier may still answer the key; a provider that
// ignores keys adds nothing.
func TestLongestIdempotencyRetentionIsTheLongestOfTheProvidersThatHonourKeys(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		file File
		want time.Duration
	}{
		{"no provider honours keys", File{Providers: map[string]Config{
			"acme": {BaseURL: "http://x.example", Create: Endpoint{Path: "/o"}},
		}}, 0},
		{"the longest of several", File{Providers: map[string]Config{
			"acme":   {BaseURL: "http://x.example", Create: Endpoint{Path: "/o"}, Idempotency: &Idempotency{Header: "Idempotency-Key", Retention: d(24 * time.Hour)}},
			"globex": {BaseURL: "http://y.example", Create: Endpoint{Path: "/o"}, Idempotency: &Idempotency{Header: "Idempotency-Key", Retention: d(30 * 24 * time.Hour)}},
			"plain":  {BaseURL: "http://z.example", Create: Endpoint{Path: "/o"}},
		}}, 30 * 24 * time.Hour},
	} {
		reg, err := NewRegistry(tc.file)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if got := reg.LongestIdempotencyRetention(); got != tc.want {
			t.Errorf("%s: %s, want %s", tc.name, got, tc.want)
		}
	}
}
