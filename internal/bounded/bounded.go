// Package bounded describes the statements that must cost what the open
// work costs, not what the history does: each package that runs such a
// statement lists it beside its SQL (ledger.BoundedQueries,
// metrics.BoundedQueries, relay.BoundedQueries) as a Query, with the
// parameters it gives it on the ledger a Fixture names.
//
// It is a leaf: it holds descriptions only and imports nothing of
// actledger, so a product package can list its queries without linking
// what fills and explains a large ledger (internal/bigledger), which
// imports the listing packages instead.
package bounded

import (
	"time"

	"github.com/google/uuid"
)

// Query is a statement to check and its parameters: positional, or one
// pgx.NamedArgs / pgx.StrictNamedArgs.
type Query struct {
	Name string
	SQL  string
	Args []any
	// Settings, when not empty, runs in the query's transaction before it
	// (SET LOCAL …), as its caller runs it.
	Settings string
	// MaxPages, when not 0, bounds the pages the query may touch instead
	// of bigledger.MaxPagesRead: a lookup that must cost the same on any
	// ledger.
	MaxPages int64
}

// Fixture names rows of a filled ledger that the queries take as
// parameters (bigledger.Pick reads them).
type Fixture struct {
	// Tenant is the largest tenant (55 % of the operations).
	Tenant uuid.UUID
	// Agent and Approver are the tenant's tokens.
	Agent, Approver uuid.UUID
	// Approval is a standing approval of the tenant with unsent
	// operations under it.
	Approval uuid.UUID
	// Settled is a succeeded operation of the tenant with five events;
	// SettledAction and SettledKey are its idempotency key.
	Settled                   uuid.UUID
	SettledAction, SettledKey string
	// Review are up to 50 of the tenant's operations in review, longest
	// waiting first: a review page; ReviewNextAt and ReviewNextID are
	// where the next page starts (the last one's updated_at and id).
	Review       []uuid.UUID
	ReviewNextAt time.Time
	ReviewNextID uuid.UUID
	// MiddleAt and MiddleID are the created_at and id of an operation
	// deep in the tenant's history: where a page far from the newest
	// starts.
	MiddleAt time.Time
	MiddleID uuid.UUID
	// Old are the tenant's 500 oldest terminal operations: a batch
	// retention would archive and delete (ledger's prune queries).
	Old []uuid.UUID
}
