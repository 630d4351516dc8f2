// Package relay publishes the rows of the transactional outbox (written by
// the ledger, its only writer) to JetStream.
//
// A Relay wakes on LISTEN/NOTIFY (outbox.Channel, sent by an
// outbox.Notifier after the writers' commits) and also polls, claims
// unpublished rows in batches with FOR UPDATE SKIP LOCKED (so several relays
// share the work and never process one row at the same time), publishes them
// asynchronously with Nats-Msg-Id, and deletes them, in the transaction
// that claimed them, only after JetStream acknowledged them: a published
// message lives in the stream, not in the outbox. A crash between publish
// and delete makes the row be published again, which JetStream's duplicate
// window absorbs and any consumer tolerates: receivers act through
// conditional updates on the ledger, never on the message alone. That is
// also why a batch commits its deletes without waiting for the disk flush:
// a delete lost in a crash of Postgres is that same republish.
//
// The relay never decides anything about operations; it only moves rows.
package relay
