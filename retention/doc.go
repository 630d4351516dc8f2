// Package retention keeps the ledger from growing forever: terminal
// operations older than a retention period are archived, then deleted,
// with their events, attempts and evidence; published outbox messages,
// applied webhook events and statement runs older than the period go too
// (a provider's last run stays), and the records of statement runs a week
// old.
//
// A Pruner works in small batches (ledger.DefaultPruneBatch operations a
// transaction). Each batch selects and locks its operations (terminal
// rows only, SKIP LOCKED: a row a live transaction holds is passed over,
// never waited for), writes their histories to the archive as JSON lines
// (view.History: the operation as GET /v1/operations/{id} gives it and its
// events as GET /v1/operations/{id}/events gives them to an operator),
// fsyncs the archive, and only then deletes them and commits. If the
// archive cannot be written or synced, the batch rolls back and the run
// stops: nothing that is not in a durable archive is ever deleted.
//
// It must never delete an operation that is in review or any open state,
// one whose compensation is still in the ledger, or one that a waiting
// stale result or dispatch message names (ledger.Store.PruneOperations
// holds the rule). One pruner runs at a time across every process (a
// Postgres advisory lock); another finds the lock taken and skips its run.
//
// A crash, or a failed commit, after a batch's archive was synced leaves
// the batch's operations in the ledger and their lines in the archive:
// the next run archives them again, in its own file. An archive line may
// therefore appear in two files; the lines of one operation are the same
// unless it changed in between, and the later one is the truth.
package retention
