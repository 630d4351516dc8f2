// Package outbox holds the rows of the transactional outbox: messages are
// written in the same Postgres transaction as the state they announce
// (Insert), so a message exists if and only if that state does.
//
// A Notifier wakes the relays after the writers' commits (a NOTIFY inside a
// data transaction would hold Postgres's notify lock until the commit is
// flushed and serialise commits). Publishing the rows to JetStream is the
// job of package relay.
//
// This package speaks only to Postgres (pgx); it must never import a NATS
// package, so that the ledger, which writes outbox rows, stays free of the
// transport.
package outbox
