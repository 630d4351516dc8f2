package ledger

import "context"

// WaitsForMessage is the SQL condition that says an operation's dispatch
// message no longer waits in the outbox, for tests that hold it to the Go
// builder of those messages.
const WaitsForMessage = waitsForMessage

// OperationsPage is the statement behind GET /v1/operations, for a test
// of its plan.
const OperationsPage = operationsPage

// TransitionOn runs one change's statement on db (a connection or a
// transaction of the test's), for tests of its plan.
func (s *Store) TransitionOn(ctx context.Context, db DBTX, c Change) (Operation, error) {
	return s.transitionOne(ctx, db, c)
}
