// Package outbox wakes the relays when the transactional outbox has new
// rows.
//
// The rows themselves are the ledger's: it is the only writer of the outbox
// table, and writes each message in the same Postgres transaction as the
// state it announces, so a message exists if and only if that state does.
// Publishing the rows to JetStream is the job of package relay.
//
// A Notifier wakes the relays after the writers' commits (a NOTIFY inside a
// data transaction would hold Postgres's notify lock until the commit is
// flushed and serialise commits): at once in the writer's own process, and
// through LISTEN/NOTIFY on Channel in the others.
//
// This package speaks only to Postgres (pgx); it must never import a NATS
// package, and it never writes an outbox row.
package outbox
