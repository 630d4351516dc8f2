package testfactory_test

import (
	"context"
	"testing"

	"github.com/actledger/actledger/auth"
	"github.com/actledger/actledger/internal/testdb"
	"github.com/actledger/actledger/internal/testfactory"
	"github.com/actledger/actledger/ledger"
)

// Each token of a tenant authenticates as its role in that tenant, and a
// second tenant of another name is another tenant.
func TestNewTenantIssuesOneWorkingTokenPerRole(t *testing.T) {
	t.Parallel()
	pool := testdb.New(t)
	tokens, err := auth.New(pool, ledger.New(pool, ledger.Config{}), auth.Config{})
	if err != nil {
		t.Fatal(err)
	}
	acme := testfactory.NewTenant(t, tokens, "Acme Corp.")
	globex := testfactory.NewTenant(t, tokens, "Globex")
	if acme.ID == globex.ID {
		t.Fatalf("two tenants share the id %s", acme.ID)
	}
	for _, tt := range []struct {
		name string
		tok  testfactory.Token
		role auth.Role
	}{
		{"agent", acme.Agent, auth.RoleAgent},
		{"approver", acme.Approver, auth.RoleApprover},
		{"operator", acme.Operator, auth.RoleOperator},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			p, err := tokens.Authenticate(context.Background(), tt.tok.Secret)
			if err != nil {
				t.Fatal(err)
			}
			if p != tt.tok.Principal || p.Role != tt.role || p.Tenant != acme.Name || p.TenantID != acme.ID {
				t.Errorf("the %s token authenticates as %+v, want %+v of tenant %s %s", tt.name, p, tt.tok.Principal, acme.Name, acme.ID)
			}
		})
	}
}
