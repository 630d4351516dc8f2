package ledger

import (
	"errors"

	"github.com/google/uuid"
)

// Access is what one caller may see and act on: one tenant, and inside it
// one access scope (a department, a team), or, with Scope empty, the whole
// tenant. Every read and every decision the ledger makes for a request
// takes one, and its queries ask scope_admits
// (schema/functions/scope_admits.sql) beside the tenant: the rule is
// written once, in SQL, and every route, MCP tool and console page that
// reads through the ledger keeps it. An object the caller may not see is
// ErrNotFound, exactly as another tenant's or a missing one.
type Access struct {
	Tenant uuid.UUID
	// Scope is the caller's access scope; empty: every scope of the
	// tenant, and the objects that have none.
	Scope string
}

// WholeTenant is access to all of tenant: a token without a scope, and the
// process's own tools (tests, the demo, the CLI's direct reads).
func WholeTenant(tenant uuid.UUID) Access { return Access{Tenant: tenant} }

// scope is Access.Scope as the queries take it: NULL for the whole tenant.
func (a Access) scope() *string { return nullString(a.Scope) }

// Errors of access scopes, which callers branch on.
var (
	// ErrKeyInUseElsewhere: the business key is unique per tenant, and an
	// operation the caller may not see (another scope's) holds it. Nothing
	// of that operation is told: not its id, status or summary, and no
	// event is added to its history.
	ErrKeyInUseElsewhere = errors.New("ledger: the key is in use by an operation outside the caller's scope")
	// ErrWholeTenantOnly: the act covers every scope of the tenant (the
	// stop button pauses a provider or an action for all of them), so a
	// caller with a scope may not do it.
	ErrWholeTenantOnly = errors.New("ledger: only a caller of the whole tenant may do this")
)
