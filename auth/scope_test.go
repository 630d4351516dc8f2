package auth_test

import (
	"context"
	"strings"
	"testing"

	"github.com/actledger/actledger/auth"
	"github.com/actledger/actledger/internal/testdb"
	"github.com/actledger/actledger/ledger"
)

// TestAScopedTokenAuthenticatesAsItsScopeAndAnUnscopedOneAsTheTenant: a
// token created with a scope is its scope's principal, from the database
// and from the cache alike, and its Access narrows its tenant to it; one
// created without is the whole tenant's, as before scopes.
func TestAScopedTokenAuthenticatesAsItsScopeAndAnUnscopedOneAsTheTenant(t *testing.T) {
	t.Parallel()
	pool := testdb.New(t)
	tokens, err := auth.New(pool, ledger.New(pool, ledger.Config{}), auth.Config{})
	if err != nil {
		t.Fatal(err)
	}
	listening(t, tokens)
	ctx := context.Background()
	scoped, err := tokens.CreateScoped(ctx, "acme", auth.RoleAgent, "", "supply-eu")
	if err != nil {
		t.Fatal(err)
	}
	whole, err := tokens.Create(ctx, "acme", auth.RoleAgent, "")
	if err != nil {
		t.Fatal(err)
	}
	for range 2 { // the second lookup of an agent's token is the cache's
		p, err := tokens.Authenticate(ctx, scoped.Secret)
		if err != nil || p.Scope != "supply-eu" || p.Access() != (ledger.Access{Tenant: p.TenantID, Scope: "supply-eu"}) {
			t.Errorf("scoped token: %+v, %v; want scope supply-eu", p, err)
		}
		p, err = tokens.Authenticate(ctx, whole.Secret)
		if err != nil || p.Scope != "" || p.Access() != ledger.WholeTenant(p.TenantID) {
			t.Errorf("token without a scope: %+v, %v; want the whole tenant", p, err)
		}
	}
}

// TestScopesMustBeVisibleAndBounded: a scope is 1 to 64 visible
// characters; an empty one, one with a space, a control, a zero-width or a
// bidi character, invalid UTF-8 or a longer one is refused (by
// CreateScoped too, which then creates nothing), so no scope can look like
// none or like another.
func TestScopesMustBeVisibleAndBounded(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		scope string
		ok    bool
	}{
		{"supply-eu", true},
		{"finance/EMEA", true},
		{"Einkauf-Süd", true},
		{strings.Repeat("é", auth.MaxScopeLength), true},
		{"", false},
		{" ", false},
		{"supply eu", false},
		{"supply\teu", false},
		{"supply\x00eu", false},
		{"supply\u200beu", false},
		{"\u202esupply", false},
		{"supply\xffeu", false},
		{strings.Repeat("a", auth.MaxScopeLength+1), false},
	} {
		if err := auth.CheckScope(tt.scope); (err == nil) != tt.ok {
			t.Errorf("CheckScope(%q) = %v, want ok %v", tt.scope, err, tt.ok)
		}
	}
	pool := testdb.New(t)
	tokens, err := auth.New(pool, ledger.New(pool, ledger.Config{}), auth.Config{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tokens.CreateScoped(context.Background(), "acme", auth.RoleAgent, "", "supply\u200beu"); err == nil {
		t.Error("CreateScoped with a zero-width space succeeded")
	}
	var n int
	if err := pool.QueryRow(context.Background(), `SELECT count(*) FROM api_tokens`).Scan(&n); err != nil || n != 0 {
		t.Errorf("%d tokens (%v) after a refused scope, want none", n, err)
	}
}
