package ledger

// WaitsForMessage is the SQL condition that says an operation's dispatch
// message no longer waits in the outbox, for tests that hold it to the Go
// builder of those messages.
const WaitsForMessage = waitsForMessage
