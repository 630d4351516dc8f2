package ledger

import (
	"context"

	"github.com/jackc/pgx/v5"
)

// WaitsForMessage is the SQL condition that says an operation's dispatch
// message no longer waits in the outbox, for tests that hold it to the Go
// builder of those messages.
const WaitsForMessage = waitsForMessage

// WaitsNowSQL and WaitsScheduledSQL are the SQL lists of the states that
// wait for a dispatch message, for the test that holds them to the Go
// rule (WaitsIn, DispatchDue).
const (
	WaitsNowSQL       = waitsNowSQL
	WaitsScheduledSQL = waitsScheduledSQL
)

// UnsentSQL is the SQL list of the states a hold of unsent work reads.
const UnsentSQL = unsentSQL

// WaitsIn is the Go rule of the states that wait for a dispatch message.
func WaitsIn(s Status, scheduled bool) bool { return waitsIn(s, scheduled) }

// OperationsPageSQL is the statement behind GET /v1/operations and the
// console's Operations page, and OperationsPageArgs the parameters the
// store gives it, for a test of its plan.
const OperationsPageSQL = operationsPage

// OperationsPageArgs are the parameters OperationsPage gives
// OperationsPageSQL.
func OperationsPageArgs(in Access, f OperationsFilter, after *OperationsCursor, limit int) pgx.StrictNamedArgs {
	return operationsPageArgs(in, f, after, limit)
}

// TransitionOn runs one change's statement on db (a connection or a
// transaction of the test's), for tests of its plan.
func (s *Store) TransitionOn(ctx context.Context, db DBTX, c Change) (Operation, error) {
	return s.transitionOne(ctx, db, c)
}
