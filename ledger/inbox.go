package ledger

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/actledger/actledger/outbox"
)

// EvidenceMessage is the outbox/JetStream message that hands a piece of
// evidence to the reconciler.
type EvidenceMessage struct {
	// Kind is "webhook" (WebhookEventID names the webhook_events row, where
	// the evidence stays) or "stale_result" (a success that a fenced worker
	// saw, carried in the fields below and kept as a stale_result event).
	Kind           string `json:"kind"`
	WebhookEventID int64  `json:"webhook_event_id,omitempty"`

	Provider          string `json:"provider,omitempty"`
	Reference         string `json:"reference,omitempty"` // the external key sent
	ProviderReference string `json:"provider_reference,omitempty"`
	Worker            string `json:"worker,omitempty"`
}

// KeepStaleResult records what a worker saw after it lost its lease (a
// stale_result event on operation id) and, when evidence is not nil, hands
// it to the reconciler on subject in the same transaction: a late success
// is the truth about the operation even though that worker may no longer
// write it.
func (s *Store) KeepStaleResult(ctx context.Context, id uuid.UUID, actor string, detail any, evidence *EvidenceMessage, subject string) error {
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if err := s.AppendEvent(ctx, tx, id, "stale_result", actor, detail); err != nil {
			return err
		}
		if evidence == nil {
			return nil
		}
		payload, err := json.Marshal(evidence)
		if err != nil {
			return fmt.Errorf("encode evidence message: %w", err)
		}
		// One message per operation and provider reference: a fenced
		// worker that records twice is deduplicated by JetStream.
		return outbox.Insert(ctx, tx, outbox.Message{Subject: subject, MsgID: "stale." + id.String() + "." + evidence.ProviderReference, Payload: payload})
	})
	if err == nil && evidence != nil {
		s.OutboxCommitted()
	}
	return err
}

// WebhookEvent is one verified supplier webhook, as stored in the inbox
// (table webhook_events). The reconciler matches Reference (the external key
// the dispatcher sent) to an operation and applies Status as evidence.
type WebhookEvent struct {
	// ID is assigned when the event is stored; it is zero in StoreWebhook's
	// argument.
	ID       int64  `db:"id"`
	Provider string `db:"provider"`
	// EventID is the supplier's id of the event; (Provider, EventID) is
	// unique, which is what makes a repeated delivery a no-op.
	EventID           string `db:"event_id"`
	Type              string `db:"type"`
	Reference         string `db:"reference"`
	ProviderReference string `db:"provider_reference"`
	// Status is "succeeded" or "failed" (a CHECK constraint enforces it).
	Status string `db:"status"`
	// Payload is the verified body as the supplier sent it, kept whole so
	// that fields this code does not read yet remain available as evidence.
	Payload    json.RawMessage `db:"payload"`
	ReceivedAt time.Time       `db:"received_at"`
	// AppliedAt and Outcome are set once by the reconciler
	// (MarkWebhookApplied); nil means not applied yet.
	AppliedAt *time.Time `db:"applied_at"`
	Outcome   *string    `db:"outcome"`
}

// WebhookMsgID is the Nats-Msg-Id of the evidence message for a webhook:
// derived from (provider, event_id), so a republished row is deduplicated.
// The event id is the supplier's free text, so it goes in as a SHA-256: a
// header-safe, bounded value that no other event id shares. Provider names
// hold no dots, so distinct pairs never share an id.
func WebhookMsgID(provider, eventID string) string {
	sum := sha256.Sum256([]byte(eventID))
	return "webhook." + provider + "." + hex.EncodeToString(sum[:])
}

const (
	// webhookEventInsert does nothing for a (provider, event_id) already
	// stored; it then returns no row. A concurrent identical insert waits
	// for the first to commit or roll back, so exactly one of them stores.
	webhookEventInsert = `INSERT INTO webhook_events (provider, event_id, type, reference, provider_reference,
    status, payload, received_at)
VALUES ($1, $2, $3, $4, $5, $6, $7, coalesce($8::timestamptz, now()))
ON CONFLICT (provider, event_id) DO NOTHING
RETURNING id`

	webhookEventGet = `SELECT id, provider, event_id, type, reference, provider_reference, status, payload,
    received_at, applied_at, outcome
FROM webhook_events WHERE id = $1`

	// webhookEventMarkApplied keeps the first mark: a redelivered evidence
	// message is applied again (harmlessly) and marked again, and the
	// record should still say when and how the event was first applied.
	webhookEventMarkApplied = `UPDATE webhook_events
SET applied_at = coalesce(applied_at, coalesce($2::timestamptz, now())), outcome = coalesce(outcome, $3)
WHERE id = $1`
)

// StoreWebhook stores a verified webhook and its evidence message for the
// reconciler (on subject) in one transaction, so the supplier gets its 2xx
// only once both are durable, and the message exists if and only if the
// event does.
//
// stored is false when (ev.Provider, ev.EventID) was stored before: the
// repeated delivery is acknowledged and ignored, and nothing is written,
// whatever its content (the first delivery is the evidence).
func (s *Store) StoreWebhook(ctx context.Context, ev WebhookEvent, subject string) (stored bool, err error) {
	err = pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		var id int64
		err := tx.QueryRow(ctx, webhookEventInsert, ev.Provider, ev.EventID, ev.Type, ev.Reference,
			ev.ProviderReference, ev.Status, []byte(ev.Payload), s.nowArg()).Scan(&id)
		if errors.Is(err, pgx.ErrNoRows) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("insert webhook %s/%s: %w", ev.Provider, ev.EventID, err)
		}
		payload, err := json.Marshal(EvidenceMessage{Kind: "webhook", WebhookEventID: id})
		if err != nil {
			return fmt.Errorf("encode evidence message: %w", err)
		}
		if err := outbox.Insert(ctx, tx, outbox.Message{
			Subject: subject, MsgID: WebhookMsgID(ev.Provider, ev.EventID), Payload: payload,
		}); err != nil {
			return err
		}
		stored = true
		return nil
	})
	if err != nil {
		return false, err
	}
	if stored {
		s.OutboxCommitted()
	}
	return stored, nil
}

// WebhookEvent returns the stored webhook id, or ErrNotFound. The
// reconciler calls it with the id from an EvidenceMessage.
func (s *Store) WebhookEvent(ctx context.Context, id int64) (WebhookEvent, error) {
	rows, _ := s.pool.Query(ctx, webhookEventGet, id)
	ev, err := pgx.CollectExactlyOneRow(rows, pgx.RowToStructByName[WebhookEvent])
	if errors.Is(err, pgx.ErrNoRows) {
		return WebhookEvent{}, ErrNotFound
	}
	if err != nil {
		return WebhookEvent{}, fmt.Errorf("get webhook event %d: %w", id, err)
	}
	return ev, nil
}

// MarkWebhookApplied records that the reconciler applied webhook id, with
// what came of it (outcome), through db (a pool, or the reconciler's
// transaction so the mark commits with the state change it describes).
//
// It is idempotent, because evidence messages may be delivered more than
// once: an event already marked keeps its first applied_at and outcome, and
// marking it again returns nil. ErrNotFound if there is no such event.
func (s *Store) MarkWebhookApplied(ctx context.Context, db DBTX, id int64, outcome string) error {
	tag, err := db.Exec(ctx, webhookEventMarkApplied, id, s.nowArg(), outcome)
	if err != nil {
		return fmt.Errorf("mark webhook event %d applied: %w", id, err)
	}
	if tag.RowsAffected() == 0 {
		return ErrNotFound
	}
	return nil
}
