package ledger

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
)

// NotificationType is the kind of event a receiver subscribes to.
type NotificationType string

// The events a receiver may subscribe to (the providers file's
// notifications: events). Which one a state causes is NotifiedType.
const (
	// NotifyApprovalRequested: a proposal waits for a person.
	NotifyApprovalRequested NotificationType = "approval.requested"
	// NotifyReviewOpened: a new review item (an operation in review, or
	// evidence that matches no operation).
	NotifyReviewOpened NotificationType = "review.opened"
	// NotifyOperationSettled: an operation reached succeeded, failed,
	// cancelled or held.
	NotifyOperationSettled NotificationType = "operation.settled"
)

// NotificationTypes lists every event type, in the contract's order.
var NotificationTypes = []NotificationType{NotifyApprovalRequested, NotifyReviewOpened, NotifyOperationSettled}

// NotifiedType is the event an operation entering status causes, or ""
// when it causes none. It is the one rule: a new proposal's notification
// (operationPropose) and unmatched evidence's (evidenceNotify) take their
// type from it as a parameter. transition_operations, which writes the
// notifications of every change, spells the rule in SQL: its arguments
// are changed only by a numbered migration that drops the function, which
// binaries still running the old call would then fail on.
// TestNotificationsOfEveryStateAreNotifiedType holds the SQL to this rule,
// state by state, through the store's own writes.
func NotifiedType(status Status) NotificationType {
	switch status {
	case StatusReview:
		return NotifyReviewOpened
	case StatusSucceeded, StatusFailed, StatusCancelled, StatusHeld:
		return NotifyOperationSettled
	case StatusAwaitingApproval:
		return NotifyApprovalRequested
	}
	return ""
}

// NotificationSubject is where the notifications of the tenant whose id is
// tenant are published, under prefix (broker.Subjects.
// NotifySubjectPrefix); each message's subject adds .<type>. The tenant's
// id, never its name, as ReviewSubject explains.
func NotificationSubject(prefix string, tenant uuid.UUID) string {
	return prefix + "." + tenant.String()
}

// Receiver is a notification receiver as the SQL writers see it: whose
// events it takes and which.
type Receiver struct {
	Name   string
	Tenant string // the tenant's name
	Events []NotificationType
}

// SyncedReceiver is a receiver as SyncReceivers stored it.
type SyncedReceiver struct {
	Name     string
	TenantID uuid.UUID
	// Since is when the receiver first appeared in the ledger: it hears
	// the events from then on.
	Since time.Time
}

const (
	// receiverUpsert stores a receiver; an unchanged one is not written
	// again (the DO UPDATE's WHERE), and keeps its created_at either way.
	receiverUpsert = `WITH up AS (
    INSERT INTO notification_receivers AS r (name, tenant_id, events, subject)
    VALUES ($1, $2, $3, $4)
    ON CONFLICT (name) DO UPDATE SET tenant_id = EXCLUDED.tenant_id, events = EXCLUDED.events,
        subject = EXCLUDED.subject, updated_at = now()
    WHERE (r.tenant_id, r.events, r.subject) IS DISTINCT FROM (EXCLUDED.tenant_id, EXCLUDED.events, EXCLUDED.subject)
    RETURNING r.created_at
)
SELECT created_at FROM up
UNION ALL
SELECT created_at FROM notification_receivers WHERE name = $1 AND NOT EXISTS (SELECT 1 FROM up)`
	receiversPrune = `DELETE FROM notification_receivers WHERE NOT (name = ANY ($1))`

	// notificationOutbox writes the outbox row of each notification the
	// statement's CTE "note" wrote: on its tenant's subject, with the
	// event's id as Nats-Msg-Id, naming the row. transition_operations
	// holds the same statement.
	notificationOutbox = `INSERT INTO outbox (subject, msg_id, payload)
    SELECT (SELECT min(r.subject) FROM notification_receivers r WHERE r.tenant_id = n.tenant_id) || '.' || n.type,
           n.id::text, convert_to(json_build_object('notification_id', n.id)::text, 'UTF8')
    FROM note n`

	// evidenceNotify notifies unmatched evidence @id, a new review item of
	// its tenant (@status, review), when a receiver of the tenant takes
	// that state's event, @notify (review.opened).
	evidenceNotify = `WITH note AS (
    INSERT INTO notifications (id, tenant_id, type, evidence_id, status, at)
    SELECT gen_random_uuid(), u.tenant_id, @notify::text, u.id, @status::text, u.created_at
    FROM unmatched_evidence u
    WHERE u.id = @id AND u.tenant_id IS NOT NULL
      AND EXISTS (SELECT 1 FROM notification_receivers r WHERE r.tenant_id = u.tenant_id AND @notify::text = ANY (r.events))
    RETURNING notifications.id, notifications.tenant_id, notifications.type
)
` + notificationOutbox
)

// SyncReceivers makes the ledger's receivers those of rs, publishing on
// subjects under prefix (NotificationSubject), so that from its commit on
// the changes of their tenants write notifications of the events they
// take, and no others do. Every process calls it at start with the
// providers file it loaded; a receiver removed from the file is removed
// here. Tenants a receiver names are created if they do not exist yet, as
// a provider's are (EnsureTenant).
func (s *Store) SyncReceivers(ctx context.Context, prefix string, rs []Receiver) ([]SyncedReceiver, error) {
	names := make([]string, 0, len(rs))
	synced := make([]SyncedReceiver, 0, len(rs))
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		for _, r := range rs {
			var tenant uuid.UUID
			if err := tx.QueryRow(ctx, tenantEnsure, uuid.New(), r.Tenant).Scan(&tenant); err != nil {
				return fmt.Errorf("ensure tenant %q: %w", r.Tenant, err)
			}
			events := make([]string, len(r.Events))
			for i, e := range r.Events {
				events[i] = string(e)
			}
			slices.Sort(events)
			var since time.Time
			if err := tx.QueryRow(ctx, receiverUpsert, r.Name, tenant, events, NotificationSubject(prefix, tenant)).Scan(&since); err != nil {
				return fmt.Errorf("store receiver %s: %w", r.Name, err)
			}
			names = append(names, r.Name)
			synced = append(synced, SyncedReceiver{Name: r.Name, TenantID: tenant, Since: since})
		}
		_, err := tx.Exec(ctx, receiversPrune, names)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("sync notification receivers: %w", err)
	}
	s.notifying.Store(len(rs) > 0)
	return synced, nil
}

// notifies reports whether op, as a change left it, may have written a
// notification: its relays are then woken after the commit rather than at
// their next poll.
func (s *Store) notifies(op Operation) bool {
	return s.notifying.Load() && NotifiedType(op.Status) != ""
}

// Notification is one event, as a worker delivers it: the row the message
// names, with the words of its operation. It holds no params and no
// supplier answer.
type Notification struct {
	ID       uuid.UUID        `db:"id"`
	TenantID uuid.UUID        `db:"tenant_id"`
	Tenant   string           `db:"tenant"`
	Type     NotificationType `db:"type"`
	// Status is the operation's state the event reports (review for
	// unmatched evidence).
	Status Status    `db:"status"`
	At     time.Time `db:"at"`
	// OperationID is nil for unmatched evidence (EvidenceID).
	OperationID *uuid.UUID `db:"operation_id"`
	EvidenceID  *int64     `db:"evidence_id"`
	// Action, Scope, Flags and DecisionReason are the operation's; for
	// evidence Action is empty and Provider names where it came from.
	Action         *string  `db:"action"`
	Provider       *string  `db:"provider"`
	Scope          *string  `db:"scope"`
	Flags          []string `db:"flags"`
	DecisionReason *string  `db:"decision_reason"`
	// ApprovedBy names who granted the operation's approval (a person, a
	// token, a policy), as GET /v1/operations/{id} does; nil before a
	// decision and for evidence.
	ApprovedBy *string `db:"approved_by"`
}

// Summary is the event's plain sentence: the operation's summary as it
// was in the state the event reports.
func (n Notification) Summary() string {
	if n.OperationID == nil {
		provider := ""
		if n.Provider != nil {
			provider = " from " + *n.Provider
		}
		return fmt.Sprintf("Evidence%s matches no operation; a person must check what happened.", provider)
	}
	op := Operation{Status: n.Status, Flags: n.Flags, DecisionReason: n.DecisionReason}
	if n.Action != nil {
		op.Action = *n.Action
	}
	return op.Summary()
}

const notificationByID = `SELECT n.id, n.tenant_id, t.name AS tenant, n.type, n.status, n.at, n.operation_id, n.evidence_id,
    o.action, coalesce(o.provider, u.provider) AS provider, o.scope, coalesce(o.flags, '{}') AS flags, o.decision_reason,
    ` + approvedByColumn + `
FROM notifications n JOIN tenants t ON t.id = n.tenant_id
LEFT JOIN operations o ON o.id = n.operation_id
LEFT JOIN unmatched_evidence u ON u.id = n.evidence_id
WHERE n.id = $1`

// Notification reads the event whose id is id, or ErrNotFound.
func (s *Store) Notification(ctx context.Context, id uuid.UUID) (Notification, error) {
	rows, _ := s.pool.Query(ctx, notificationByID, id)
	n, err := pgx.CollectExactlyOneRow(rows, pgx.RowToStructByName[Notification])
	if errors.Is(err, pgx.ErrNoRows) {
		return Notification{}, ErrNotFound
	}
	if err != nil {
		return Notification{}, fmt.Errorf("read notification %s: %w", id, err)
	}
	return n, nil
}

// NotificationMessage is the body of a notification's message on the
// stream: a pointer to its row.
type NotificationMessage struct {
	NotificationID uuid.UUID `json:"notification_id"`
}

// DeliveryOutcome is how one attempt to deliver an event to a receiver
// ended.
type DeliveryOutcome string

// The outcomes RecordDelivery takes.
const (
	// DeliveryDelivered: the receiver answered 2xx; nothing more is sent.
	DeliveryDelivered DeliveryOutcome = "delivered"
	// DeliveryRetrying: the attempt failed; another follows.
	DeliveryRetrying DeliveryOutcome = "retrying"
	// DeliveryGivenUp: the attempt failed and the retry window is over.
	DeliveryGivenUp DeliveryOutcome = "given_up"
)

// Delivery is what happened so far to one event at one receiver.
type Delivery struct {
	Attempts    int        `db:"attempts"`
	LastStatus  *int       `db:"last_status"`
	LastError   *string    `db:"last_error"`
	DeliveredAt *time.Time `db:"delivered_at"`
	GivenUpAt   *time.Time `db:"given_up_at"`
}

// Done reports whether nothing more is to be sent: delivered or given up.
func (d Delivery) Done() bool { return d.DeliveredAt != nil || d.GivenUpAt != nil }

const (
	deliveryByKey = `SELECT attempts, last_status, last_error, delivered_at, given_up_at
FROM notification_deliveries WHERE notification_id = $1 AND receiver = $2`

	// deliveryRecord counts one attempt; once delivered or given up a
	// delivery stays so (a late attempt's record changes nothing).
	deliveryRecord = `INSERT INTO notification_deliveries AS d (notification_id, receiver, attempts, last_status, last_error,
    delivered_at, given_up_at, updated_at)
VALUES (@id, @receiver, 1, @status, @error,
    CASE WHEN @outcome = 'delivered' THEN coalesce(@now::timestamptz, now()) END,
    CASE WHEN @outcome = 'given_up' THEN coalesce(@now::timestamptz, now()) END,
    coalesce(@now::timestamptz, now()))
ON CONFLICT (notification_id, receiver) DO UPDATE SET
    attempts = d.attempts + 1, last_status = EXCLUDED.last_status, last_error = EXCLUDED.last_error,
    delivered_at = EXCLUDED.delivered_at, given_up_at = EXCLUDED.given_up_at, updated_at = EXCLUDED.updated_at
WHERE d.delivered_at IS NULL AND d.given_up_at IS NULL`
)

// Delivery reads what happened so far to event id at receiver; the zero
// Delivery when nothing was attempted yet.
func (s *Store) Delivery(ctx context.Context, id uuid.UUID, receiver string) (Delivery, error) {
	rows, _ := s.pool.Query(ctx, deliveryByKey, id, receiver)
	d, err := pgx.CollectExactlyOneRow(rows, pgx.RowToStructByName[Delivery])
	if errors.Is(err, pgx.ErrNoRows) {
		return Delivery{}, nil
	}
	if err != nil {
		return Delivery{}, fmt.Errorf("read delivery of %s to %s: %w", id, receiver, err)
	}
	return d, nil
}

// RecordDelivery records one attempt to deliver event id to receiver: the
// receiver's HTTP status (0 when none came) or the error, and how it ended.
// A final outcome settles the event once no other receiver waits for it,
// so that the stalled-notification sweep no longer reads it.
func (s *Store) RecordDelivery(ctx context.Context, id uuid.UUID, receiver string, status int, errText string, outcome DeliveryOutcome) error {
	var st *int
	if status != 0 {
		st = &status
	}
	_, err := s.pool.Exec(ctx, deliveryRecord, pgx.StrictNamedArgs{
		"id": id, "receiver": receiver, "status": st, "error": nullString(errText), "outcome": string(outcome), "now": s.nowArg(),
	})
	if err != nil {
		return fmt.Errorf("record delivery of %s to %s: %w", id, receiver, err)
	}
	if outcome == DeliveryRetrying {
		return nil
	}
	// After the record's commit, so that it counts; a receiver finishing
	// at the same moment may be missed here, and the sweep settles it.
	return s.settleNotification(ctx, id)
}

// ReceiverFailures is how many events were given up for one receiver.
type ReceiverFailures struct {
	Receiver string `db:"receiver"`
	// Failed counts the events given up for it, ever; 0 for a receiver
	// that never failed.
	Failed int64 `db:"failed"`
	// LastFailedAt is when the latest was given up; nil when none was.
	LastFailedAt *time.Time `db:"last_failed_at"`
}

// receiverFailures counts given-up deliveries of each receiver in the
// ledger (those the notification workers synced), from the partial index
// of given-up rows: delivered rows are never read. $1 NULL: every
// tenant's receivers.
const receiverFailures = `SELECT r.name AS receiver, count(d.receiver) AS failed, max(d.given_up_at) AS last_failed_at
FROM notification_receivers r
LEFT JOIN notification_deliveries d ON d.receiver = r.name AND d.given_up_at IS NOT NULL
WHERE $1::uuid IS NULL OR r.tenant_id = $1
GROUP BY r.name
ORDER BY r.name`

// NotificationFailures lists every receiver of tenant (uuid.Nil: of every
// tenant) with the events given up for it: "notifications failing", the
// same in every process, for /metrics (actledger_notifications_failed_total)
// and the console's overview.
func NotificationFailures(ctx context.Context, db DBTX, tenant uuid.UUID) ([]ReceiverFailures, error) {
	rows, _ := db.Query(ctx, receiverFailures, nullUUID(tenant))
	out, err := pgx.CollectRows(rows, pgx.RowToStructByName[ReceiverFailures])
	if err != nil {
		return nil, fmt.Errorf("count failed notifications: %w", err)
	}
	return out, nil
}

// NotificationFailures is the package's NotificationFailures for the
// receivers of in's tenant. Receivers hear a whole tenant, so a scoped
// caller sees none.
func (s *Store) NotificationFailures(ctx context.Context, in Access) ([]ReceiverFailures, error) {
	if in.scope() != nil {
		return nil, nil
	}
	return NotificationFailures(ctx, s.pool, in.Tenant)
}

// notifyEvidence writes the review.opened notification of unmatched
// evidence id in tx, when a receiver of its tenant takes it.
func (s *Store) notifyEvidence(ctx context.Context, tx *Tx, id int64) error {
	tag, err := tx.tx.Exec(ctx, evidenceNotify, pgx.StrictNamedArgs{"id": id, "status": StatusReview, "notify": NotifiedType(StatusReview)})
	if err != nil {
		return fmt.Errorf("notify evidence %d: %w", id, err)
	}
	if tag.RowsAffected() > 0 {
		tx.wroteOutbox = true
	}
	return nil
}

// SetNotifying says whether this process's providers file has receivers,
// so that changes that may notify wake the relays after their commit (a
// process that does not run the notification worker does not call
// SyncReceivers).
func (s *Store) SetNotifying(on bool) { s.notifying.Store(on) }
