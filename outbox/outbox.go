package outbox

import (
	"context"
	"fmt"
	"time"

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
