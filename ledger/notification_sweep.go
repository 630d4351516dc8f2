package ledger

import (
	"context"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
)

// notificationWaiting are the receivers event n is not finished at: those
// of its tenant that take its type and existed when it happened (the
// worker's own test of whose event it is), with no delivered or given-up
// delivery of it. The one rule of "settled": no receiver waiting.
const notificationWaiting = `SELECT r.name FROM notification_receivers r
    WHERE r.tenant_id = n.tenant_id AND n.type = ANY (r.events) AND r.created_at <= n.at
      AND NOT EXISTS (SELECT 1 FROM notification_deliveries d
                      WHERE d.notification_id = n.id AND d.receiver = r.name
                        AND (d.delivered_at IS NOT NULL OR d.given_up_at IS NOT NULL))`

const (
	// notificationSettle marks event $1 settled once no receiver waits
	// for it; run after a final outcome is committed, so that it sees it.
	notificationSettle = `UPDATE notifications n SET settled_at = coalesce($2::timestamptz, now())
WHERE n.id = $1 AND n.settled_at IS NULL AND NOT EXISTS (` + notificationWaiting + `)`

	// notificationsRepublish is the sweep of stalled notifications, in
	// one statement. It walks the open events (notifications_open_idx)
	// older than @cutoff whose last re-publish is older than their
	// backoff (@base_us doubled per re-publish, at most @max_backoff_us),
	// the oldest @limit, and locks them (SKIP LOCKED: two sweeps never
	// take one event). Those no receiver waits for any more are settled.
	// The others are re-published, a new outbox row under the event's id
	// as Nats-Msg-Id, when no outbox row of theirs still waits and no
	// waiting receiver had an attempt since @cutoff (a receiver in its
	// backoff is not stalled): the message JetStream had is lost, or
	// nobody took it.
	notificationsRepublish = `WITH open AS (
    SELECT n.id FROM notifications n
    WHERE n.settled_at IS NULL AND n.at < @cutoff
      AND (n.republished_at IS NULL OR n.republished_at <= coalesce(@now::timestamptz, now())
           - least(@base_us::bigint * interval '1 microsecond' * power(2, least(n.republishes, 30))::float8,
                   @max_backoff_us::bigint * interval '1 microsecond'))
    ORDER BY n.at LIMIT @limit
), locked AS (
    SELECT n.id, n.tenant_id, n.type, ARRAY(` + notificationWaiting + ` ORDER BY r.name) AS waiting
    FROM notifications n
    WHERE n.id IN (SELECT id FROM open) AND n.settled_at IS NULL
    FOR UPDATE OF n SKIP LOCKED
), settle AS (
    UPDATE notifications n SET settled_at = coalesce(@now::timestamptz, now())
    FROM locked l WHERE n.id = l.id AND cardinality(l.waiting) = 0
), due AS (
    SELECT l.* FROM locked l
    WHERE cardinality(l.waiting) > 0
      AND NOT EXISTS (SELECT 1 FROM outbox o WHERE o.msg_id = l.id::text AND o.published_at IS NULL)
      AND NOT EXISTS (SELECT 1 FROM notification_deliveries d
                      WHERE d.notification_id = l.id AND d.receiver = ANY (l.waiting) AND d.updated_at >= @cutoff)
), upd AS (
    UPDATE notifications n SET republishes = n.republishes + 1, republished_at = coalesce(@now::timestamptz, now())
    FROM due WHERE n.id = due.id
    RETURNING n.id, n.tenant_id, n.type, n.republishes
), ob AS (
    INSERT INTO outbox (subject, msg_id, payload)
    SELECT (SELECT min(r.subject) FROM notification_receivers r WHERE r.tenant_id = u.tenant_id) || '.' || u.type,
           u.id::text, convert_to(json_build_object('notification_id', u.id)::text, 'UTF8')
    FROM upd u
)
SELECT u.id, t.name AS tenant, u.type, due.waiting AS receivers, u.republishes
FROM upd u JOIN due ON due.id = u.id JOIN tenants t ON t.id = u.tenant_id
ORDER BY u.id`
)

// Republished is a notification the sweep published again: whose event,
// for which receivers, the how-many-th time.
type Republished struct {
	ID     uuid.UUID        `db:"id"`
	Tenant string           `db:"tenant"`
	Type   NotificationType `db:"type"`
	// Receivers are the receivers it is not yet delivered to or given up
	// at: the only ones it will be sent to.
	Receivers   []string `db:"receivers"`
	Republishes int      `db:"republishes"`
}

// RepublishStalled publishes again, up to limit, the notifications that
// happened before now-stall and are not finished at every receiver that
// takes them, with no outbox row still waiting and no attempt at a waiting
// receiver within stall: their message was lost (JetStream lost it, or a
// consumer's state), and "delivered at least once" needs a new one, under
// the same id, so the receivers drop a repeat by webhook-id. An event that
// stays stalled is found again only after a backoff, stall doubled per
// re-publish, at most maxBackoff. Open events found finished are settled.
func (s *Store) RepublishStalled(ctx context.Context, stall, maxBackoff time.Duration, limit int) ([]Republished, error) {
	var out []Republished
	err := s.InTx(ctx, func(tx *Tx) error {
		rows, _ := tx.tx.Query(ctx, notificationsRepublish, notificationsRepublishArgs(s.Now().Add(-stall), s.nowArg(), stall, maxBackoff, limit))
		var err error
		out, err = pgx.CollectRows(rows, pgx.RowToStructByName[Republished])
		if err != nil {
			return fmt.Errorf("re-publish stalled notifications: %w", err)
		}
		if len(out) > 0 {
			tx.wroteOutbox = true
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

func notificationsRepublishArgs(cutoff time.Time, now *time.Time, stall, maxBackoff time.Duration, limit int) pgx.StrictNamedArgs {
	return pgx.StrictNamedArgs{"cutoff": cutoff, "now": now, "base_us": stall.Microseconds(),
		"max_backoff_us": maxBackoff.Microseconds(), "limit": limit}
}

// settleNotification marks event id settled when no receiver waits for it
// any more, after a final outcome at one of them.
func (s *Store) settleNotification(ctx context.Context, id uuid.UUID) error {
	if _, err := s.pool.Exec(ctx, notificationSettle, id, s.nowArg()); err != nil {
		return fmt.Errorf("settle notification %s: %w", id, err)
	}
	return nil
}
