package auth_test

import (
	"context"
	"errors"
	"testing"

	"github.com/actledger/actledger/auth"
	"github.com/actledger/actledger/internal/testpipeline"
)

// TestRevokeByIDRevokesOnlyThatToken: `actledger token revoke NAME|ID`
// names one token. A token whose name is another token's id would make
// that argument name two, and a revoke meant for one would silently end
// the other too, in whatever tenant (its unsent work not held, its cached
// lookups not evicted): such a name is refused, and a revoke ends exactly
// one token, the id's first, even when a database from before holds such
// a name.
func TestRevokeByIDRevokesOnlyThatToken(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	p := testpipeline.New(t, testpipeline.Options{})
	tokens := p.CLITokens()
	first, err := tokens.Create(ctx, p.Tenant, auth.RoleAgent, "")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tokens.Create(ctx, "Other Corp.", auth.RoleOperator, first.ID.String()); err == nil {
		t.Errorf("a token named after another token's id %s was created", first.ID)
	}
	second, err := tokens.Create(ctx, "Other Corp.", auth.RoleOperator, "other-operator")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.Pool.Exec(ctx, `UPDATE api_tokens SET name = $1 WHERE id = $2`, first.ID.String(), second.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := tokens.Revoke(ctx, first.ID.String(), "test"); err != nil {
		t.Fatal(err)
	}
	if _, err := tokens.Authenticate(ctx, first.Secret); !errors.Is(err, auth.ErrUnauthenticated) {
		t.Errorf("the revoked token authenticates: %v", err)
	}
	if _, err := tokens.Authenticate(ctx, second.Secret); err != nil {
		t.Errorf("revoking %s also ended another tenant's token named so: %v", first.ID, err)
	}
}
