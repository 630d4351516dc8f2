// Package testfactory makes the objects many tests start from, ready to
// use: a tenant with its tokens, an operation in the state a test needs
// (made through the ledger's own functions; Backdate, which moves
// operations into the past, is the one write of their rows). A test names
// what it needs in one line, and the lines that issue and check them are
// written once, here, instead of in every package's fixture.
//
// It is for tests and the harnesses that run the system outside a test
// (cmd/actchaos); production code never imports it.
package testfactory

import (
	"context"

	"github.com/google/uuid"

	"github.com/actledger/actledger/auth"
)

// TB is the part of testing.TB the factory uses; cmd/actchaos, which
// makes a tenant outside a test, supplies its own.
type TB interface {
	Helper()
	Fatalf(format string, args ...any)
}

// Token is an issued token: the secret a client sends as its bearer
// token, and the principal it authenticates as (its id, name, role and
// tenant), which a test needs to call the ledger directly as that token.
type Token struct {
	Secret string
	auth.Principal
}

// Tenant is a tenant with one token of each role: what a deployment's
// first `actledger token create` calls make, and what most tests that go
// through the API or the ledger need before anything else.
type Tenant struct {
	// Name is the tenant's name, as tokens and the providers config's
	// "tenant:" name it; ID is its id in the ledger.
	Name string
	ID   uuid.UUID
	// Agent proposes operations, Approver grants approvals, Operator
	// works the review queue and the stop button.
	Agent, Approver, Operator Token
}

// NewTenant issues an agent, an approver and an operator token for the
// tenant called name (created if new) from tokens, and authenticates each
// once, so the tokens are known to work. A failure ends t. The tokens
// live in the ledger's database: they go when it goes, and need no
// cleanup of their own.
func NewTenant(t TB, tokens *auth.Tokens, name string) Tenant {
	t.Helper()
	tenant := Tenant{Name: name}
	for _, tok := range []struct {
		role auth.Role
		into *Token
	}{
		{auth.RoleAgent, &tenant.Agent},
		{auth.RoleApprover, &tenant.Approver},
		{auth.RoleOperator, &tenant.Operator},
	} {
		*tok.into = NewToken(t, tokens, name, tok.role)
	}
	tenant.ID = tenant.Agent.TenantID
	return tenant
}

// NewToken issues one token of role for the tenant called name (created
// if new) and authenticates it once. A failure ends t.
func NewToken(t TB, tokens *auth.Tokens, name string, role auth.Role) Token {
	t.Helper()
	c, err := tokens.Create(context.Background(), name, role, "")
	if err != nil {
		t.Fatalf("testfactory: create a %s token for %s: %v", role, name, err)
	}
	return authenticated(t, tokens, c, name, role)
}

// NewScopedToken is NewToken for a token of the access scope scope inside
// the tenant: it sees and acts on that scope's objects only.
func NewScopedToken(t TB, tokens *auth.Tokens, name string, role auth.Role, scope string) Token {
	t.Helper()
	c, err := tokens.CreateScoped(context.Background(), name, role, "", scope)
	if err != nil {
		t.Fatalf("testfactory: create a %s token of scope %s for %s: %v", role, scope, name, err)
	}
	return authenticated(t, tokens, c, name, role)
}

// authenticated authenticates the new token c once.
func authenticated(t TB, tokens *auth.Tokens, c auth.Created, name string, role auth.Role) Token {
	t.Helper()
	p, err := tokens.Authenticate(context.Background(), c.Secret)
	if err != nil {
		t.Fatalf("testfactory: authenticate the new %s token of %s: %v", role, name, err)
	}
	return Token{Secret: c.Secret, Principal: p}
}
