// Package outbox is the transactional outbox: messages are written in the
// same Postgres transaction as the state they announce (Insert), and a Relay
// publishes them to JetStream.
//
// The relay wakes on LISTEN/NOTIFY, sent by a Notifier after the writers'
// commits (a NOTIFY inside a data transaction would hold Postgres's notify
// lock until the commit is flushed and serialise commits), and also polls, claims unpublished rows in
// batches with FOR UPDATE SKIP LOCKED (so several relays share the work and
// never process one row at the same time), publishes them asynchronously
// with Nats-Msg-Id, and marks them published only after JetStream
// acknowledged them. A crash between publish and mark makes the row be
// published again, which JetStream's duplicate window absorbs and any
// consumer tolerates: receivers act through conditional updates on the
// ledger, never on the message alone.
//
// The relay never decides anything about operations; it only moves rows.
package outbox
