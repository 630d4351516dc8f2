// Package relay publishes the rows of the transactional outbox (written by
// the ledger, its only writer) to JetStream.
//
// A Relay wakes on LISTEN/NOTIFY (outbox.Channel, sent by an
// outbox.Notifier after the writers' commits) and also polls, claims
// unpublished rows in batches with FOR UPDATE SKIP LOCKED (so several relays
// share the work and never process one row at the same time), publishes them
// asynchronously with Nats-Msg-Id, and marks them published only after
// JetStream acknowledged them. A crash between publish and mark makes the row
// be published again, which JetStream's duplicate window absorbs and any
// consumer tolerates: receivers act through conditional updates on the
// ledger, never on the message alone. That is also why a batch commits its
// marks without waiting for the disk flush: a mark lost in a crash of
// Postgres is that same republish.
//
// The relay never decides anything about operations; it only moves rows.
package relay
