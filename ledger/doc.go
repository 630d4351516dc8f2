// Package ledger is actledger's source of truth: approvals, operations, their
// states and their append-only event history, all in Postgres.
//
// Every state change goes through Store.Transition, which applies the one
// transition table (Transitions) with a conditional update on the
// operation's version (the fencing token) and appends the event in the same
// statement. A stale writer therefore can never overwrite newer state; what
// it saw is kept with AppendEvent as evidence instead.
//
// Claim and Record are Transition for the hot path: a claim with its
// approval check, and a result with nothing else to commit. They and Enqueue
// share round trips and commits with the other writers in flight (one
// pgx.Batch, one implicit transaction), because on a busy database commits,
// not statements, are what run out first; within a batch, all transitions
// are one transition_operations statement and all enqueues one
// enqueue_operations statement (schema 016), so the database also plans,
// starts and triggers once per batch rather than once per operation. A
// write that fails is re-run on its own, so it never fails another.
//
// Enqueue writes an operation, its first event and its outbox message in one
// transaction and consumes one use of its approval there too, so a crash
// leaves either all of them or none, and an approval with max_uses 1 can
// never be used twice, even by concurrent requests.
//
// Propose stores an agent's proposal (awaiting_approval) with its first
// event and no approval and no outbox message, so nothing can send it;
// Approve grants an approval bound to it, uses it, queues it and writes its
// outbox message in one transaction, and Deny cancels it. A proposal
// nobody decides in time, or whose requesting token is revoked, is held.
//
// The ledger is the only writer of the transactional outbox. A change that
// leaves an operation waiting for a dispatch message (queued, or a retry or
// lookup scheduled) gets that message in the same transaction, from
// Transition, TransitionTx and Record: no caller writes, or remembers, a
// message. Enqueue, Approve, Redispatch, ResumeDispatch, StoreWebhook,
// KeepStaleResult and RecordUnmatched write the messages of their own
// writes the same way, and every transition into review writes its review
// announcement in the same statement. Notifications follow the same rule
// (notification.go): a settled operation, a new review item and a proposal
// that waits for a person write their event and its outbox row in the
// statement or transaction of the change, when a receiver of the tenant
// takes it (SyncReceivers). Subjects (which *broker.Broker
// satisfies) says where each message goes; a writer with several ledger
// writes to commit together uses InTx and the …Tx methods, and relays are
// woken after the commit (Config.OutboxCommitted).
//
// Every read and decision for a request takes the caller's Access (a
// tenant, narrowed to an access scope when the caller has one), and its
// query asks scope_admits (schema/functions/scope_admits.sql) beside the
// tenant: another tenant's or another scope's object is ErrNotFound, and a
// key another scope holds ErrKeyInUseElsewhere. Keys stay unique per
// tenant.
//
// Judge is the one reading of an operation's history: whether an earlier
// attempt may have had an effect, and whether one was confirmed.
//
// The ledger never talks to providers or to NATS: the dispatcher and the
// relay do, and they report back through this package. It must never import
// a NATS package (deps_test.go holds it to that), and no other package
// writes outbox rows.
package ledger
