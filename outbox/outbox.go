package outbox

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// Execer is the smallest executor Insert needs; a pool and a pgx.Tx both
// satisfy it. Pass the transaction that writes the state the message
// announces: the message then exists if and only if that state does.
type Execer interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
}

// Message is one row of the outbox.
type Message struct {
	// Subject is the JetStream subject to publish to.
	Subject string
	// MsgID is sent as Nats-Msg-Id, so a republished row is deduplicated
	// by JetStream inside its duplicate window. It must be unique per
	// logical message.
	MsgID string
	// Payload is the message body.
	Payload []byte
	// DeliverAfter, when set, holds the message back until then (a retry's
	// backoff); the relay publishes it once it is due.
	DeliverAfter time.Time
}

const outboxInsert = `INSERT INTO outbox (subject, msg_id, payload, deliver_after) VALUES ($1, $2, $3, $4)`

// Insert adds m to the outbox inside the caller's transaction.
func Insert(ctx context.Context, db Execer, m Message) error {
	if m.Subject == "" || m.MsgID == "" {
		return fmt.Errorf("outbox: message needs a subject and a msg id")
	}
	var after *time.Time
	if !m.DeliverAfter.IsZero() {
		after = &m.DeliverAfter
	}
	if _, err := db.Exec(ctx, outboxInsert, m.Subject, m.MsgID, m.Payload, after); err != nil {
		return fmt.Errorf("outbox: insert %s: %w", m.MsgID, err)
	}
	return nil
}

const (
	// outboxBacklog counts rows that are due and unpublished; scheduled
	// retries are not lag.
	outboxBacklog = `SELECT count(*), coalesce(extract(epoch FROM now() - min(coalesce(deliver_after, created_at))), 0)
FROM outbox WHERE published_at IS NULL AND (deliver_after IS NULL OR deliver_after <= now())`
)

// Backlog returns how many rows wait to be published and the age of the
// oldest, for metrics and readiness.
func Backlog(ctx context.Context, db interface {
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}) (rows int64, oldest time.Duration, err error) {
	var secs float64
	if err := db.QueryRow(ctx, outboxBacklog).Scan(&rows, &secs); err != nil {
		return 0, 0, fmt.Errorf("outbox: backlog: %w", err)
	}
	return rows, time.Duration(secs * float64(time.Second)), nil
}
