// Package reconciler closes the loop between what the ledger believes and
// what providers actually did, and gives operators the tools for what
// machines cannot settle.
//
// Evidence (a signed webhook, a fenced worker's late success, a lookup
// result) is applied to the ledger with
// conditional updates, each as an event naming its source: a success settles
// any operation that never confirmed an outcome (and is flagged when it
// arrives after the approval lapsed, never dispatched again); a second,
// different success for one operation is a duplicate effect for a person; a
// final failure settles what was never confirmed; evidence about an
// operation it cannot settle (cancelled, or a proposal still awaiting its
// decision) is kept in that operation's history; evidence that matches no
// operation, or whose amounts differ from what was approved, becomes a
// review item. Review items are also announced on the review stream
// (review.<tenant id>.<reason>), which replay re-reads, for the replaying
// tenant only.
//
// Evidence messages are pointers: each names a stored row (webhook_events,
// stale_results), and only the row is applied. The reconciler must never
// apply what a message says by itself: a message naming no row, or another
// provider's row, is terminated. Rows whose message never comes are
// applied from Postgres by the sweep.
//
// The reconciler never creates external effects: it only looks up and
// records. Retrying is an operator's decision, made through Retry.
package reconciler
