package ledger

// WaitsForMessage is the SQL condition that says an operation's dispatch
// message no longer waits in the outbox, for tests that hold it to the Go
// builder of those messages.
const WaitsForMessage = waitsForMessage

// OperationsPage is the statement behind GET /v1/operations, for a test
// of its plan.
const OperationsPage = operationsPage
