// Package testoutbox writes outbox rows for tests that play a writer the
// ledger would never be (a duplicated message, a row from another
// deployment): outside tests the ledger is the outbox's only writer.
package testoutbox

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/actledger/actledger/ledger"
)

// Execer is a pool, a connection or a transaction.
type Execer interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
}

const outboxInsert = `INSERT INTO outbox (subject, msg_id, payload, deliver_after) VALUES ($1, $2, $3, $4)`

// Insert writes m to the outbox through db, failing t on an error.
func Insert(t testing.TB, db Execer, m ledger.OutboxMessage) {
	t.Helper()
	if err := InsertErr(context.Background(), db, m); err != nil {
		t.Fatalf("testoutbox: insert %s: %v", m.MsgID, err)
	}
}

// InsertErr is Insert that returns the error, for a transaction's callback.
func InsertErr(ctx context.Context, db Execer, m ledger.OutboxMessage) error {
	var after *time.Time
	if !m.DeliverAfter.IsZero() {
		after = &m.DeliverAfter
	}
	_, err := db.Exec(ctx, outboxInsert, m.Subject, m.MsgID, m.Payload, after)
	return err
}
