package ledger

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// Subjects names the subjects the ledger's outbox rows are published on.
// The ledger is the only writer of outbox rows, and it decides which of
// them a change needs; the transport decides where they go. It is defined
// here so the ledger never imports the transport: *broker.Broker satisfies
// it.
type Subjects interface {
	// DispatchSubject is where provider's dispatch messages go.
	DispatchSubject(provider string) string
	// EvidenceSubject is where messages naming stored evidence about
	// provider's operations (webhooks, late results) go.
	EvidenceSubject(provider string) string
	// ReviewSubjectPrefix starts the subject of every review
	// announcement (see ReviewSubject).
	ReviewSubjectPrefix() string
}

// ErrNoSubjects is returned by a write that needs an outbox message from a
// Store built without Config.Subjects (a store for reads and token
// commands): nothing is written.
var ErrNoSubjects = errors.New("ledger: Config.Subjects is required to write outbox messages")

// Tx is one ledger transaction, for a writer whose several ledger writes
// must commit together (an operator's resolution and its compensation).
// InTx opens it, and after its commit tells relays about the outbox rows
// it added, so no caller has to remember to.
type Tx struct {
	tx pgx.Tx
	// wroteOutbox: the transaction added outbox rows.
	wroteOutbox bool
}

// InTx runs fn in one transaction and commits it if fn returns nil. After
// a commit that added outbox rows it signals the relays (Config.
// OutboxCommitted), so they publish at once instead of at their next poll.
func (s *Store) InTx(ctx context.Context, fn func(tx *Tx) error) error {
	var t *Tx
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		// A fresh Tx per attempt: BeginFunc runs fn once, but a Tx must
		// never report rows of a transaction that rolled back.
		t = &Tx{tx: tx}
		return fn(t)
	})
	if err == nil && t != nil && t.wroteOutbox {
		s.signalOutbox()
	}
	return err
}

// signalOutbox tells relays that outbox rows were committed.
func (s *Store) signalOutbox() {
	if s.outboxCommitted != nil {
		s.outboxCommitted()
	}
}

// OutboxMessage is one row of the transactional outbox, which the relay
// publishes to JetStream. Only the ledger writes such rows (tests write
// them through internal/testoutbox).
type OutboxMessage struct {
	// Subject is the JetStream subject to publish to.
	Subject string
	// MsgID is sent as Nats-Msg-Id, so a republished row is deduplicated
	// by JetStream inside its duplicate window. It must be unique per
	// logical message.
	MsgID string
	// Payload is the message body: a pointer to a row, never the facts.
	Payload []byte
	// DeliverAfter, when set, holds the message back until then (a retry's
	// backoff); the relay publishes it once it is due.
	DeliverAfter time.Time
	// Traceparent is the W3C trace context the relay sends with the
	// message (tracing.Traceparent); empty for none.
	Traceparent string
}

const outboxInsert = `INSERT INTO outbox (subject, msg_id, payload, deliver_after, traceparent) VALUES ($1, $2, $3, $4, $5)`

// insertOutbox is the ledger's one write of an outbox row outside the SQL
// functions that enqueue and transition operations: the row exists if and
// only if tx commits the state it announces.
func (s *Store) insertOutbox(ctx context.Context, tx *Tx, m OutboxMessage) error {
	if m.Subject == "" || m.MsgID == "" {
		return fmt.Errorf("outbox: message needs a subject and a msg id")
	}
	var after *time.Time
	if !m.DeliverAfter.IsZero() {
		after = &m.DeliverAfter
	}
	if _, err := tx.tx.Exec(ctx, outboxInsert, m.Subject, m.MsgID, m.Payload, after, nullString(m.Traceparent)); err != nil {
		return fmt.Errorf("outbox: insert %s: %w", m.MsgID, err)
	}
	tx.wroteOutbox = true
	return nil
}

// outboxBacklog counts rows that are due and unpublished; scheduled
// retries are not lag.
const outboxBacklog = `SELECT count(*), coalesce(extract(epoch FROM now() - min(coalesce(deliver_after, created_at))), 0)
FROM outbox WHERE published_at IS NULL AND (deliver_after IS NULL OR deliver_after <= now())`

// OutboxBacklog returns how many outbox rows wait to be published and the
// age of the oldest, for metrics and readiness.
func OutboxBacklog(ctx context.Context, db interface {
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}) (rows int64, oldest time.Duration, err error) {
	var secs float64
	if err := db.QueryRow(ctx, outboxBacklog).Scan(&rows, &secs); err != nil {
		return 0, 0, fmt.Errorf("outbox backlog: %w", err)
	}
	return rows, time.Duration(secs * float64(time.Second)), nil
}

// dispatchSubject is the subject of provider's dispatch messages, or
// ErrNoSubjects.
func (s *Store) dispatchSubject(provider string) (string, error) {
	if s.subjects == nil {
		return "", ErrNoSubjects
	}
	return s.subjects.DispatchSubject(provider), nil
}

// evidenceSubject is the subject of messages naming provider's stored
// evidence, or ErrNoSubjects.
func (s *Store) evidenceSubject(provider string) (string, error) {
	if s.subjects == nil {
		return "", ErrNoSubjects
	}
	return s.subjects.EvidenceSubject(provider), nil
}

// reviewSubjectPrefix is what review announcements' subjects start with;
// empty (no announcements) for a store without Subjects.
func (s *Store) reviewSubjectPrefix() string {
	if s.subjects == nil {
		return ""
	}
	return s.subjects.ReviewSubjectPrefix()
}

// waitsForDispatch reports whether op, as a change left it, waits for a
// dispatch message: queued (due now), or retry_wait and unknown with their
// next attempt scheduled. The rule "a state that waits for a message gets
// its outbox row in the same transaction" is written here once; every
// transition goes through TransitionTx, which applies it.
func waitsForDispatch(op Operation) bool {
	return waitsIn(op.Status, op.NextAttemptAt != nil)
}

// needsDispatch is waitsForDispatch judged on a change before it runs: a
// change that does would be left without its message by a statement of its
// own.
func needsDispatch(c Change) bool { return waitsIn(c.To, !c.NextAttemptAt.IsZero()) }

// needsTx reports whether c is written in a transaction of its own rather
// than a shared batch: it writes a dispatch message, or may open a review
// on the operation it compensates.
func needsTx(c Change) bool { return needsDispatch(c) || c.CompensationReview != nil }

// waitsIn reports whether status, with a next attempt scheduled or not,
// waits for a dispatch message. It is the one rule of which states wait:
// waitsNow, waitsScheduled, AwaitsDispatch, waitsNowSQL and
// waitsScheduledSQL follow it.
func waitsIn(status Status, scheduled bool) bool {
	return waitsNow(status) || (scheduled && waitsScheduled(status))
}

// AwaitsDispatch reports whether an operation in s is one a dispatch
// message may be for: queued, or retry_wait and unknown, which wait for
// one once their next attempt is scheduled (waitsIn). A dispatcher claims
// from these states only, once the message is due (DispatchDue).
func (s Status) AwaitsDispatch() bool { return waitsIn(s, true) }

// waitsNow reports whether an operation in status waits for a dispatch
// message that is due at once: a queued one, whose message its change
// wrote.
func waitsNow(status Status) bool { return status == StatusQueued }

// waitsScheduled reports whether an operation in status waits for a
// dispatch message once its next attempt (a retry, a lookup) is
// scheduled, due then.
func waitsScheduled(status Status) bool {
	return status == StatusRetryWait || status == StatusUnknown
}

// waitsNowSQL and waitsScheduledSQL are waitsNow and waitsScheduled
// written as SQL lists of states, for the statements that look for
// operations waiting for their dispatch message (operationsRedispatch,
// operationsReleasable). They are literals, not a parameter built from
// the Go rule: the partial indexes those statements walk
// (operations_waiting_idx, operations_due_idx, operations_unsent_list_idx)
// list the same states, and Postgres uses a partial index only where it
// can prove from the statement that its states are among the index's. A
// generic plan of a cached statement cannot prove that of a parameter and
// reads the whole table instead. TestWaitingStatesOfSQLAreThoseOfGo holds
// both to the Go rule, state by state.
const (
	waitsNowSQL       = `'queued'`
	waitsScheduledSQL = `'retry_wait', 'unknown'`
)

// DispatchDue is when the dispatch message of an operation in status,
// whose next attempt is next, is due: a queued operation's at once (zero),
// a scheduled retry's or lookup's at its next attempt. Every writer that
// holds a dispatch message back (a change, dispatchAfter; a resume,
// Requeue.message) holds it until then, and a dispatcher takes a message
// that arrives well before it for early. The stuck sweep reads the same
// times in SQL (updated_at of a queued operation, next_attempt_at of a
// scheduled one) and takes only operations due since before its cutoff,
// so its message is never held back.
func DispatchDue(status Status, next *time.Time) time.Time {
	if !waitsScheduled(status) || next == nil {
		return time.Time{}
	}
	return *next
}

// dispatchAfter writes the dispatch message of op, which a change in tx
// has just left waiting for one (waitsForDispatch), held back until it is
// due (DispatchDue).
func (s *Store) dispatchAfter(ctx context.Context, tx *Tx, op Operation) error {
	subject, err := s.dispatchSubject(op.Provider)
	if err != nil {
		return err
	}
	m := DispatchMessage{Subject: subject, OperationID: op.ID, Version: op.Version, Traceparent: deref(op.Traceparent),
		DeliverAfter: DispatchDue(op.Status, op.NextAttemptAt)}
	if err := s.insertOutbox(ctx, tx, m.Outbox()); err != nil {
		return fmt.Errorf("schedule dispatch of %s: %w", op.ID, err)
	}
	return nil
}
