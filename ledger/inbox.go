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

	"github.com/actledger/actledger/tracing"
)

// EvidenceMessage is the outbox/JetStream message that hands a piece of
// evidence to the reconciler. It is a pointer: it names a stored row
// (WebhookEventID or StaleResultID, by Kind), and the reconciler applies
// that row. Nothing in the message itself is evidence, so whoever can
// publish on the stream can at most make the reconciler look at a row
// that exists.
type EvidenceMessage struct {
	Kind           EvidenceKind `json:"kind"`
	WebhookEventID int64        `json:"webhook_event_id,omitempty"`
	StaleResultID  int64        `json:"stale_result_id,omitempty"`

	// ProviderReference and Worker are what a fenced worker hands to
	// KeepStaleResult: they are stored in the stale_results row and never
	// published, nor read from a message.
	ProviderReference string `json:"-"`
	Worker            string `json:"-"`
	// Provider and Reference are ignored: the row takes both from the
	// operation. They remain so that callers written against the earlier
	// message compile.
	Provider  string `json:"-"`
	Reference string `json:"-"`
}

// StaleResult is what a worker saw after it lost its claim (table
// stale_results): a success the reconciler applies to whatever state the
// operation is in by then.
type StaleResult struct {
	ID          int64     `db:"id"`
	OperationID uuid.UUID `db:"operation_id"`
	// Provider and Reference (the external key sent) are the operation's.
	Provider          string           `db:"provider"`
	Reference         string           `db:"reference"`
	ProviderReference string           `db:"provider_reference"`
	Worker            string           `db:"worker"`
	RecordedAt        time.Time        `db:"recorded_at"`
	AppliedAt         *time.Time       `db:"applied_at"`
	Outcome           *EvidenceOutcome `db:"outcome"`
}

const (
	// staleResultInsert takes the provider from the operation; a result
	// stored before for the same operation and reference returns no row.
	staleResultInsert = `INSERT INTO stale_results (operation_id, provider, provider_reference, worker, recorded_at)
SELECT o.id, o.provider, $2, $3, coalesce($4::timestamptz, now()) FROM operations o WHERE o.id = $1
ON CONFLICT (operation_id, provider_reference) DO NOTHING
RETURNING id, provider`

	staleResultColumns = `r.id, r.operation_id, r.provider, o.external_key AS reference, r.provider_reference, r.worker,
    r.recorded_at, r.applied_at, r.outcome`

	staleResultGet = `SELECT ` + staleResultColumns + `
FROM stale_results r JOIN operations o ON o.id = r.operation_id WHERE r.id = $1`

	staleResultMarkApplied = `UPDATE stale_results
SET applied_at = coalesce(applied_at, coalesce($2::timestamptz, now())), outcome = coalesce(outcome, $3)
WHERE id = $1`
)

// KeepStaleResult records what a worker saw after it lost its lease (a
// stale_result event on operation id) and, when evidence is not nil (a
// success, with its ProviderReference), stores it as a stale_results row
// and hands the reconciler a message naming that row on the evidence
// subject of the operation's provider, in the same transaction: a late success is
// the truth about the operation even though that worker may no longer
// write it.
func (s *Store) KeepStaleResult(ctx context.Context, id uuid.UUID, actor string, detail any, evidence *EvidenceMessage) error {
	return s.InTx(ctx, func(tx *Tx) error {
		if err := s.appendEvent(ctx, tx.tx, id, EventStaleResult, actor, detail); err != nil {
			return err
		}
		if evidence == nil || evidence.ProviderReference == "" {
			return nil // nothing the reconciler could match
		}
		var rowID int64
		var provider string
		err := tx.tx.QueryRow(ctx, staleResultInsert, id, evidence.ProviderReference, evidence.Worker, s.nowArg()).Scan(&rowID, &provider)
		if errors.Is(err, pgx.ErrNoRows) {
			return nil // stored (and announced) before
		}
		if err != nil {
			return fmt.Errorf("store stale result of %s: %w", id, err)
		}
		// The row says whose operation it is, whatever the worker says.
		subject, err := s.evidenceSubject(provider)
		if err != nil {
			return err
		}
		payload, err := json.Marshal(EvidenceMessage{Kind: EvidenceStaleResult, StaleResultID: rowID})
		if err != nil {
			return fmt.Errorf("encode evidence message: %w", err)
		}
		return s.insertOutbox(ctx, tx, OutboxMessage{Subject: subject, MsgID: StaleResultMsgID(rowID), Payload: payload,
			Traceparent: tracing.Traceparent(ctx)})
	})
}

// StaleResultMsgID is the Nats-Msg-Id of the evidence message naming
// stale_results row id.
func StaleResultMsgID(id int64) string { return fmt.Sprintf("stale_result.%d", id) }

// StaleResult returns stale_results row id, or ErrNotFound. The reconciler
// calls it with the id from an EvidenceMessage.
func (s *Store) StaleResult(ctx context.Context, id int64) (StaleResult, error) {
	rows, _ := s.pool.Query(ctx, staleResultGet, id)
	r, err := pgx.CollectExactlyOneRow(rows, pgx.RowToStructByName[StaleResult])
	if errors.Is(err, pgx.ErrNoRows) {
		return StaleResult{}, ErrNotFound
	}
	if err != nil {
		return StaleResult{}, fmt.Errorf("get stale result %d: %w", id, err)
	}
	return r, nil
}

// MarkStaleResultApplied records that the reconciler applied stale result
// id, with what came of it; like MarkWebhookApplied it keeps the first
// mark. ErrNotFound if there is no such row.
func (s *Store) MarkStaleResultApplied(ctx context.Context, id int64, outcome EvidenceOutcome) error {
	tag, err := s.pool.Exec(ctx, staleResultMarkApplied, id, s.nowArg(), outcome)
	if err != nil {
		return fmt.Errorf("mark stale result %d applied: %w", id, err)
	}
	if tag.RowsAffected() == 0 {
		return ErrNotFound
	}
	return nil
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
	// Status is EvidenceSucceeded, EvidenceFailed or EvidenceIgnored (a
	// CHECK constraint enforces it).
	Status EvidenceStatus `db:"status"`
	// Payload is the verified body as the supplier sent it, kept whole so
	// that fields this code does not read yet remain available as evidence.
	Payload    json.RawMessage `db:"payload"`
	ReceivedAt time.Time       `db:"received_at"`
	// AppliedAt and Outcome are set once by the reconciler
	// (MarkWebhookApplied); nil means not applied yet.
	AppliedAt *time.Time       `db:"applied_at"`
	Outcome   *EvidenceOutcome `db:"outcome"`
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
	// webhookEventInsert stores a verified webhook; an ignored one is
	// applied as it is stored.
	webhookEventInsert = `INSERT INTO webhook_events (provider, event_id, type, reference, provider_reference,
    status, payload, received_at, applied_at, outcome)
VALUES (@provider, @event_id, @type, @reference, @provider_reference, @status, @payload, coalesce(@now::timestamptz, now()),
    CASE WHEN @status = 'ignored' THEN coalesce(@now::timestamptz, now()) END,
    CASE WHEN @status = 'ignored' THEN 'ignored' END)
ON CONFLICT (provider, event_id) DO NOTHING
RETURNING id`

	webhookEventGet = `SELECT id, provider, event_id, type, reference, provider_reference, status, payload,
    received_at, applied_at, outcome
FROM webhook_events WHERE id = $1`

	// webhookEventMarkApplied keeps the first mark: a row applied by its
	// message and by the sweep at once (or by a redelivery that raced the
	// mark) is marked twice, and the record should still say when and how
	// the event was first applied.
	webhookEventMarkApplied = `UPDATE webhook_events
SET applied_at = coalesce(applied_at, coalesce($2::timestamptz, now())), outcome = coalesce(outcome, $3)
WHERE id = $1`
)

// StoreWebhook stores a verified webhook and its evidence message for the
// reconciler (on its provider's evidence subject) in one transaction, so
// the supplier gets its 2xx only once both are durable, and the message
// exists if and only if the event does.
//
// stored is false when (ev.Provider, ev.EventID) was stored before: the
// repeated delivery is acknowledged and ignored, and nothing is written,
// whatever its content (the first delivery is the evidence).
func (s *Store) StoreWebhook(ctx context.Context, ev WebhookEvent) (stored bool, err error) {
	subject, err := s.evidenceSubject(ev.Provider)
	if err != nil {
		return false, err
	}
	err = s.InTx(ctx, func(tx *Tx) error {
		stored = false
		var id int64
		err := tx.tx.QueryRow(ctx, webhookEventInsert, pgx.StrictNamedArgs{
			"provider": ev.Provider, "event_id": ev.EventID, "type": ev.Type, "reference": ev.Reference,
			"provider_reference": ev.ProviderReference, "status": ev.Status, "payload": []byte(ev.Payload), "now": s.nowArg(),
		}).Scan(&id)
		if errors.Is(err, pgx.ErrNoRows) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("insert webhook %s/%s: %w", ev.Provider, ev.EventID, err)
		}
		stored = true
		if ev.Status == EvidenceIgnored {
			return nil // applied as it was stored: nothing to reconcile
		}
		payload, err := json.Marshal(EvidenceMessage{Kind: EvidenceWebhook, WebhookEventID: id})
		if err != nil {
			return fmt.Errorf("encode evidence message: %w", err)
		}
		if err := s.insertOutbox(ctx, tx, OutboxMessage{
			Subject: subject, MsgID: WebhookMsgID(ev.Provider, ev.EventID), Payload: payload,
			Traceparent: tracing.Traceparent(ctx),
		}); err != nil {
			return err
		}
		return nil
	})
	if err != nil {
		return false, err
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
func (s *Store) MarkWebhookApplied(ctx context.Context, id int64, outcome EvidenceOutcome) error {
	tag, err := s.pool.Exec(ctx, webhookEventMarkApplied, id, s.nowArg(), outcome)
	if err != nil {
		return fmt.Errorf("mark webhook event %d applied: %w", id, err)
	}
	if tag.RowsAffected() == 0 {
		return ErrNotFound
	}
	return nil
}

// SweepPolicy bounds how long evidence may wait for its message before the
// reconciler applies it from Postgres, and how often it looks again at a
// row it could not apply.
type SweepPolicy struct {
	// After is how long a row may stay unapplied before the sweep takes
	// it; it is also the first backoff, doubled after every sweep of the
	// row up to MaxBackoff.
	After      time.Duration
	MaxBackoff time.Duration
	// Limit bounds the rows taken per call.
	Limit int
}

const (
	// webhookEventsSweep takes the unapplied events that waited long
	// enough and, in the same statement, pushes their next look back
	// (After doubled per sweep, capped), so concurrent reconcilers take
	// each row once per backoff and a row that cannot be applied yet is
	// not tried every sweep.
	webhookEventsSweep = `UPDATE webhook_events w
SET sweeps = w.sweeps + 1,
    next_sweep_at = coalesce($1::timestamptz, now())
        + least($2::float8 * power(2.0, least(w.sweeps, 20)), $3::float8) * interval '1 second'
WHERE w.id IN (
    SELECT id FROM webhook_events
    WHERE applied_at IS NULL
      AND coalesce(next_sweep_at, received_at + $2::float8 * interval '1 second') <= coalesce($1::timestamptz, now())
    ORDER BY id
    LIMIT $4
    FOR UPDATE SKIP LOCKED)
RETURNING w.id, w.provider, w.event_id, w.type, w.reference, w.provider_reference, w.status, w.payload,
    w.received_at, w.applied_at, w.outcome`

	// staleResultsSweep is webhookEventsSweep for stale_results.
	staleResultsSweep = `UPDATE stale_results r
SET sweeps = r.sweeps + 1,
    next_sweep_at = coalesce($1::timestamptz, now())
        + least($2::float8 * power(2.0, least(r.sweeps, 20)), $3::float8) * interval '1 second'
FROM operations o
WHERE o.id = r.operation_id AND r.id IN (
    SELECT id FROM stale_results
    WHERE applied_at IS NULL
      AND coalesce(next_sweep_at, recorded_at + $2::float8 * interval '1 second') <= coalesce($1::timestamptz, now())
    ORDER BY id
    LIMIT $4
    FOR UPDATE SKIP LOCKED)
RETURNING ` + staleResultColumns
)

// SweepWebhookEvents takes webhook events that are still unapplied p.After
// after they were stored (their evidence message was lost, or is very
// late), for the reconciler to apply from Postgres.
func (s *Store) SweepWebhookEvents(ctx context.Context, p SweepPolicy) ([]WebhookEvent, error) {
	rows, _ := s.pool.Query(ctx, webhookEventsSweep, s.nowArg(), p.After.Seconds(), p.MaxBackoff.Seconds(), p.Limit)
	evs, err := pgx.CollectRows(rows, pgx.RowToStructByName[WebhookEvent])
	if err != nil {
		return nil, fmt.Errorf("sweep unapplied webhook events: %w", err)
	}
	return evs, nil
}

// SweepStaleResults is SweepWebhookEvents for stale results.
func (s *Store) SweepStaleResults(ctx context.Context, p SweepPolicy) ([]StaleResult, error) {
	rows, _ := s.pool.Query(ctx, staleResultsSweep, s.nowArg(), p.After.Seconds(), p.MaxBackoff.Seconds(), p.Limit)
	rs, err := pgx.CollectRows(rows, pgx.RowToStructByName[StaleResult])
	if err != nil {
		return nil, fmt.Errorf("sweep unapplied stale results: %w", err)
	}
	return rs, nil
}
