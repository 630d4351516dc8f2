package ledger

import (
	"context"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/actledger/actledger/outbox"
)

// Lapse says why an operation may no longer be sent although it was
// approved: empty when it may be sent.
type Lapse string

// The reasons an approved operation may lapse before it is sent.
const (
	LapseNone            Lapse = ""
	LapseApprovalRevoked Lapse = "approval_revoked"
	LapseApprovalExpired Lapse = "approval_expired"
	LapseTokenRevoked    Lapse = "token_revoked"
)

const operationLapse = `SELECT
    CASE
        WHEN a.revoked_at IS NOT NULL THEN 'approval_revoked'
        WHEN a.expires_at <= coalesce($2::timestamptz, now()) THEN 'approval_expired'
        WHEN k.revoked_at IS NOT NULL THEN 'token_revoked'
        ELSE ''
    END
FROM operations o
JOIN approvals a ON a.id = o.approval_id
JOIN api_tokens k ON k.id = o.requested_by
WHERE o.id = $1`

// CheckLapse tells whether operation id may still be sent: its approval
// neither revoked nor expired, and the token that asked for it not revoked.
// The dispatcher asks right before every provider call.
func (s *Store) CheckLapse(ctx context.Context, db DBTX, id uuid.UUID) (Lapse, error) {
	var lapse Lapse
	if err := db.QueryRow(ctx, operationLapse, id, s.nowArg()).Scan(&lapse); err != nil {
		return LapseNone, fmt.Errorf("check approval of %s: %w", id, err)
	}
	return lapse, nil
}

// Pause is an active stop-button entry: no operation of the tenant that
// matches it (empty provider or action matches any) is claimed.
type Pause struct {
	Provider string    `json:"provider,omitempty"`
	Action   string    `json:"action,omitempty"`
	PausedBy string    `json:"paused_by"`
	PausedAt time.Time `json:"paused_at"`
}

// waitsForMessage holds for an operation o that no pause covers and whose
// dispatch message is not waiting in the outbox: one that only a new
// message will move.
const waitsForMessage = `NOT EXISTS (
      SELECT 1 FROM outbox b
      WHERE b.published_at IS NULL AND b.msg_id LIKE 'dispatch.' || o.id::text || '.%')
  AND NOT EXISTS (
      SELECT 1 FROM dispatch_pauses p
      WHERE p.tenant_id = o.tenant_id
        AND (p.provider IS NULL OR p.provider = o.provider)
        AND (p.action IS NULL OR p.action = o.action))`

const (
	pauseInsert = `INSERT INTO dispatch_pauses (tenant_id, provider, action, paused_by, paused_at)
VALUES ($1, $2, $3, $4, coalesce($5::timestamptz, now()))
ON CONFLICT (tenant_id, coalesce(provider, ''), coalesce(action, '')) DO NOTHING`

	// pausesDeleteWithin removes every pause of the tenant that lies within
	// the scope $2 (provider), $3 (action), where '' matches any: a pause of
	// one provider lies within a scope of any provider, but a pause of every
	// provider does not lie within a scope that names one.
	pausesDeleteWithin = `DELETE FROM dispatch_pauses
WHERE tenant_id = $1 AND ($2 = '' OR provider = $2) AND ($3 = '' OR action = $3)`

	// pausesList is bounded by what may be paused (one pause per
	// configured provider and action, and their combinations), and by
	// MaxPauses whatever the configuration.
	pausesList = `SELECT coalesce(provider, '') AS provider, coalesce(action, '') AS action, paused_by, paused_at
FROM dispatch_pauses WHERE tenant_id = $1 ORDER BY id
LIMIT ` + maxPausesSQL

	// operationsReleasable finds the work a resume releases: operations of
	// the scope that no remaining pause covers and that wait for a dispatch
	// message: queued, retry_wait and unknown ones whose message is no
	// longer waiting in the outbox (it may have arrived during the pause,
	// had its claim refused and been acknowledged). One whose message still
	// waits there gets it on time, and a repeated resume adds nothing.
	operationsReleasable = `SELECT o.id, o.version, o.provider, o.status, o.next_attempt_at, o.created_at FROM operations o
WHERE o.tenant_id = $1
  AND ($2 = '' OR o.provider = $2) AND ($3 = '' OR o.action = $3)
  AND o.status IN ('queued', 'retry_wait', 'unknown')
  AND ` + waitsForMessage + `
  AND ($4::timestamptz IS NULL OR (o.created_at, o.id) > ($4, $5))
ORDER BY o.created_at, o.id
LIMIT $6`
)

// PauseDispatch stops claims of the tenant's operations for provider and/or
// action (empty means any). Work already in flight finishes.
func (s *Store) PauseDispatch(ctx context.Context, tenant uuid.UUID, provider, action, actor string) error {
	if _, err := s.pool.Exec(ctx, pauseInsert, tenant, nullString(provider), nullString(action), actor, s.nowArg()); err != nil {
		return fmt.Errorf("pause dispatch: %w", err)
	}
	return nil
}

// Requeue is an operation a resume hands back to the dispatcher.
type Requeue struct {
	ID       uuid.UUID `db:"id"`
	Version  int64     `db:"version"`
	Provider string    `db:"provider"`
	Status   Status    `db:"status"`
	// NextAttemptAt is when a retry_wait or unknown operation is due; nil
	// for a queued one, which is due now.
	NextAttemptAt *time.Time `db:"next_attempt_at"`
	// CreatedAt orders a resume's batches.
	CreatedAt time.Time `db:"created_at"`
}

// DefaultResumeBatch is how many operations a resume releases per
// transaction by default.
const DefaultResumeBatch = 500

// Message is the outbox message that releases r on subject: a deliberate
// re-publish of its version (at makes its Nats-Msg-Id new), held back until
// r is due. Never earlier: the dispatcher drops a message that arrives
// before next_attempt_at as early, and the operation would then wait for
// the stuck sweeper.
func (r Requeue) Message(subject string, at time.Time) outbox.Message {
	m := RedispatchOutbox(subject, r.ID, r.Version, at)
	if r.NextAttemptAt != nil {
		m.DeliverAfter = *r.NextAttemptAt
	}
	return m
}

// ResumeDispatch removes every pause of tenant that lies within the scope
// provider, action ("" matches any), so an empty scope clears them all, and
// returns how many it removed. It then finds the operations of the scope
// that no remaining pause covers and that wait for a dispatch message, and
// hands them to publish (which writes their messages to the outbox, see
// Requeue.Message), in batches of Config.ResumeBatch, oldest first, each
// in its own transaction: the pauses go with the first batch. A resume of
// a long pause so never holds one transaction (and the locks and outbox rows
// of every operation) open. If a later batch fails, the pauses are gone and
// the earlier batches released; the error says so, and a repeated resume
// (or the stuck sweeper) releases the rest. Resuming where nothing is
// paused is not an error: it removes nothing and still releases what
// waits, so a resume can be repeated safely.
func (s *Store) ResumeDispatch(ctx context.Context, tenant uuid.UUID, provider, action string, publish func(tx pgx.Tx, released []Requeue) error) (removed int, err error) {
	var afterAt *time.Time
	var afterID uuid.UUID
	for batch := 0; ; batch++ {
		n := 0
		err = pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
			if batch == 0 {
				tag, err := tx.Exec(ctx, pausesDeleteWithin, tenant, provider, action)
				if err != nil {
					return fmt.Errorf("resume dispatch: %w", err)
				}
				removed = int(tag.RowsAffected())
			}
			rows, _ := tx.Query(ctx, operationsReleasable, tenant, provider, action, afterAt, afterID, s.resumeBatch)
			released, err := pgx.CollectRows(rows, pgx.RowToStructByName[Requeue])
			if err != nil {
				return fmt.Errorf("find released operations: %w", err)
			}
			n = len(released)
			if n == 0 {
				return nil
			}
			last := released[n-1]
			afterAt, afterID = &last.CreatedAt, last.ID
			return publish(tx, released)
		})
		if err != nil {
			if batch > 0 {
				return removed, fmt.Errorf("resume dispatch: pauses removed and %d batch(es) released, then: %w", batch, err)
			}
			return 0, err
		}
		if n > 0 {
			s.OutboxCommitted()
		}
		if n < s.resumeBatch {
			return removed, nil
		}
	}
}

// MaxPauses bounds the pauses Pauses lists.
const (
	MaxPauses    = 500
	maxPausesSQL = "500"
)

// Pauses lists the tenant's active pauses (at most MaxPauses).
func (s *Store) Pauses(ctx context.Context, tenant uuid.UUID) ([]Pause, error) {
	rows, _ := s.pool.Query(ctx, pausesList, tenant)
	pauses, err := pgx.CollectRows(rows, pgx.RowToStructByName[Pause])
	if err != nil {
		return nil, fmt.Errorf("list pauses: %w", err)
	}
	return pauses, nil
}

// operationsInFlight is a page of the tenant's dispatching operations,
// oldest claim first, after position ($2, $3) when $2 is set.
const operationsInFlight = `SELECT ` + operationColumns + `
FROM operations o JOIN tenants t ON t.id = o.tenant_id
WHERE o.tenant_id = $1 AND o.status = 'dispatching'
  AND ($2::timestamptz IS NULL OR (o.updated_at, o.id) > ($2, $3))
ORDER BY o.updated_at, o.id
LIMIT $4`

// InFlight lists at most limit of the tenant's operations being dispatched
// now, after position after (nil: from the oldest claim): what may still
// land at a provider even after a pause.
func (s *Store) InFlight(ctx context.Context, tenant uuid.UUID, after *Position, limit int) ([]Operation, error) {
	at, id := after.args()
	rows, _ := s.pool.Query(ctx, operationsInFlight, tenant, at, id, limit)
	ops, err := pgx.CollectRows(rows, pgx.RowToStructByName[Operation])
	if err != nil {
		return nil, fmt.Errorf("list in-flight operations: %w", err)
	}
	return ops, nil
}

const (
	// operationsLeaseExpired are claims whose worker stopped reporting:
	// the call may or may not have happened.
	operationsLeaseExpired = `SELECT ` + operationColumns + `
FROM operations o JOIN tenants t ON t.id = o.tenant_id
WHERE o.status = 'dispatching' AND o.lease_expires_at < coalesce($1::timestamptz, now())
ORDER BY o.lease_expires_at
LIMIT $2`

	// operationsStuck are operations waiting for a dispatch message that
	// should have arrived long ago (a message lost by JetStream, or never
	// delivered): queued and not updated since before, or due since
	// before, the cutoff, with no message of theirs waiting in the outbox,
	// and not paused.
	operationsStuck = `SELECT ` + operationColumns + `
FROM operations o JOIN tenants t ON t.id = o.tenant_id
WHERE ((o.status = 'queued' AND o.updated_at < $1)
    OR (o.status IN ('retry_wait', 'unknown') AND o.next_attempt_at < $1))
  AND ` + waitsForMessage + `
ORDER BY o.updated_at
LIMIT $2`
)

// LeaseExpired returns up to limit operations whose dispatch lease has
// expired.
func (s *Store) LeaseExpired(ctx context.Context, limit int) ([]Operation, error) {
	rows, _ := s.pool.Query(ctx, operationsLeaseExpired, s.nowArg(), limit)
	ops, err := pgx.CollectRows(rows, pgx.RowToStructByName[Operation])
	if err != nil {
		return nil, fmt.Errorf("find expired leases: %w", err)
	}
	return ops, nil
}

// Stuck returns up to limit operations that have waited since before cutoff
// for a dispatch message that never came.
func (s *Store) Stuck(ctx context.Context, cutoff time.Time, limit int) ([]Operation, error) {
	rows, _ := s.pool.Query(ctx, operationsStuck, cutoff, limit)
	ops, err := pgx.CollectRows(rows, pgx.RowToStructByName[Operation])
	if err != nil {
		return nil, fmt.Errorf("find stuck operations: %w", err)
	}
	return ops, nil
}
