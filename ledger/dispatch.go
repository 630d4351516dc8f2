package ledger

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
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
	// LapseApprovalMismatch: the action's provider now points at another
	// account or environment than the approval was granted for.
	LapseApprovalMismatch Lapse = "approval_mismatch"
)

// operationLapse says whether operation $1 may still be sent now ($2):
// its approval neither revoked nor expired nor granted for another
// provider target than the current one ($3 account, $4 environment; a NULL
// $3 skips that comparison, and so does an approval older than the
// binding, whose account is NULL), and its requesting token not revoked.
const operationLapse = `SELECT operation_lapse(a, k, coalesce($2::timestamptz, now()), $3::text, $4::text)
FROM operations o
JOIN approvals a ON a.id = o.approval_id
JOIN api_tokens k ON k.id = o.requested_by
WHERE o.id = $1`

// CheckLapse tells whether operation id may still be sent: its approval
// neither revoked nor expired, and the token that asked for it not revoked.
// Workers learn the same in the statements that claim and confirm a claim
// (Claim, ConfirmClaim), right before every provider call, and there also
// whether the approval was granted for the provider target they would
// send to; CheckLapse, which knows no target, does not compare it.
func (s *Store) CheckLapse(ctx context.Context, id uuid.UUID) (Lapse, error) {
	var lapse Lapse
	if err := s.pool.QueryRow(ctx, operationLapse, id, s.nowArg(), nil, nil).Scan(&lapse); err != nil {
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
      WHERE b.published_at IS NULL AND b.msg_id LIKE '` + dispatchMsgIDPrefix + `' || o.id::text || '.%')
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
	// the scope (@provider, @action; '' matches any) that no remaining pause covers and that wait for a dispatch
	// message: queued, retry_wait and unknown ones whose message is no
	// longer waiting in the outbox (it may have arrived during the pause,
	// had its claim refused and been acknowledged). One whose message still
	// waits there gets it on time, and a repeated resume adds nothing. A
	// page: at most @limit, after position (@after_at, @after_id) when
	// @after_at is set.
	operationsReleasable = `SELECT o.id, o.version, o.provider, o.status, o.next_attempt_at, o.created_at FROM operations o
WHERE o.tenant_id = @tenant
  AND (@provider = '' OR o.provider = @provider) AND (@action = '' OR o.action = @action)
  AND o.status IN ('queued', 'retry_wait', 'unknown')
  AND ` + waitsForMessage + `
  AND (@after_at::timestamptz IS NULL OR (o.created_at, o.id) > (@after_at, @after_id))
ORDER BY o.created_at, o.id
LIMIT @limit`
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

// message is the outbox message that releases r on subject: a deliberate
// re-publish of its version (at makes its Nats-Msg-Id new), held back until
// r is due. Never earlier: the dispatcher drops a message that arrives
// before next_attempt_at as early, and the operation would then wait for
// the stuck sweeper.
func (r Requeue) message(subject string, at time.Time) OutboxMessage {
	m := DispatchMessage{Subject: subject, OperationID: r.ID, Version: r.Version, RepublishedAt: at}
	if r.NextAttemptAt != nil {
		m.DeliverAfter = *r.NextAttemptAt
	}
	return m.Outbox()
}

// ResumeDispatch removes every pause of tenant that lies within the scope
// provider, action ("" matches any), so an empty scope clears them all, and
// returns how many it removed. It then finds the operations of the scope
// that no remaining pause covers and that wait for a dispatch message, and
// writes their messages to the outbox (queued ones due now, retry_wait and
// unknown ones at their schedule), in batches of Config.ResumeBatch, oldest
// first, each in its own transaction: the pauses go with the first batch.
// released counts the operations of the committed batches. A resume of a
// long pause so never holds one transaction (and the locks and outbox rows
// of every operation) open. If a later batch fails, the pauses are gone and
// the earlier batches released; the error says so, and a repeated resume
// (or the stuck sweeper) releases the rest. Resuming where nothing is
// paused is not an error: it removes nothing and still releases what
// waits, so a resume can be repeated safely.
func (s *Store) ResumeDispatch(ctx context.Context, tenant uuid.UUID, provider, action string) (removed, released int, err error) {
	var afterAt *time.Time
	var afterID uuid.UUID
	now := s.Now()
	for batch := 0; ; batch++ {
		n := 0
		err = s.InTx(ctx, func(tx *Tx) error {
			if batch == 0 {
				tag, err := tx.tx.Exec(ctx, pausesDeleteWithin, tenant, provider, action)
				if err != nil {
					return fmt.Errorf("resume dispatch: %w", err)
				}
				removed = int(tag.RowsAffected())
			}
			rows, _ := tx.tx.Query(ctx, operationsReleasable, pgx.StrictNamedArgs{
				"tenant": tenant, "provider": provider, "action": action,
				"after_at": afterAt, "after_id": afterID, "limit": s.resumeBatch,
			})
			ops, err := pgx.CollectRows(rows, pgx.RowToStructByName[Requeue])
			if err != nil {
				return fmt.Errorf("find released operations: %w", err)
			}
			n = len(ops)
			if n == 0 {
				return nil
			}
			last := ops[n-1]
			afterAt, afterID = &last.CreatedAt, last.ID
			for _, op := range ops {
				subject, err := s.dispatchSubject(op.Provider)
				if err != nil {
					return err
				}
				if err := s.insertOutbox(ctx, tx, op.message(subject, now)); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			if batch > 0 {
				return removed, released, fmt.Errorf("resume dispatch: pauses removed and %d batch(es) released, then: %w", batch, err)
			}
			return 0, 0, err
		}
		released += n
		if n < s.resumeBatch {
			return removed, released, nil
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

	// operationsRedispatch finds operations waiting for a dispatch message
	// that should have arrived long ago (a message lost by JetStream, or
	// never delivered): queued and not updated since before, or due since
	// before, @cutoff, with no message of theirs waiting in the outbox, and
	// not paused. It takes only those whose last re-publish
	// (redispatched_at) is older than their backoff: @base_us doubled per
	// re-publish since the operation last changed, capped at
	// @max_backoff_us. It
	// records the re-publish on the operation and as an event, in the same
	// statement, so two sweepers never re-publish one operation twice.
	operationsRedispatch = `WITH due AS (
    SELECT o.id FROM operations o
    WHERE ((o.status = 'queued' AND o.updated_at < @cutoff)
        OR (o.status IN ('retry_wait', 'unknown') AND o.next_attempt_at < @cutoff))
      AND ` + waitsForMessage + `
      AND (o.redispatched_at IS NULL OR o.redispatched_at < o.updated_at
           OR o.redispatched_at <= coalesce(@now::timestamptz, now())
                - least(@base_us::bigint * interval '1 microsecond' * power(2, least(o.redispatches, 30))::float8, @max_backoff_us::bigint * interval '1 microsecond'))
    ORDER BY o.updated_at
    LIMIT @limit
    FOR UPDATE OF o SKIP LOCKED
), upd AS (
    UPDATE operations o SET
        redispatches    = CASE WHEN o.redispatched_at IS NULL OR o.redispatched_at < o.updated_at
                               THEN 1 ELSE o.redispatches + 1 END,
        redispatched_at = coalesce(@now::timestamptz, now())
    FROM due WHERE o.id = due.id
    RETURNING o.*
), ev AS (
    INSERT INTO operation_events (operation_id, tenant_id, at, kind, from_status, to_status, actor, detail)
    SELECT id, tenant_id, redispatched_at, @kind, status, status, @actor,
           jsonb_build_object('redispatches', redispatches,
               'next_not_before', redispatched_at + least(@base_us::bigint * interval '1 microsecond' * power(2, least(redispatches, 30))::float8,
                                                          @max_backoff_us::bigint * interval '1 microsecond'))
    FROM upd
)
SELECT ` + operationColumns + `
FROM upd o JOIN tenants t ON t.id = o.tenant_id`
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

// Redispatch finds up to limit operations that have waited since before
// cutoff for a dispatch message that never came, records on each that it
// is re-published now (an event EventRedispatched) and writes its message
// again, in one transaction, and returns them. An operation that stays
// stuck is found again only after its backoff: base, doubled per
// re-publish since it last changed, at most maxBackoff.
func (s *Store) Redispatch(ctx context.Context, cutoff time.Time, base, maxBackoff time.Duration, limit int, actor string) ([]Operation, error) {
	now := s.Now()
	var stuck []Operation
	err := s.InTx(ctx, func(tx *Tx) error {
		rows, _ := tx.tx.Query(ctx, operationsRedispatch, pgx.StrictNamedArgs{
			"cutoff": cutoff, "now": s.nowArg(), "base_us": base.Microseconds(), "max_backoff_us": maxBackoff.Microseconds(),
			"limit": limit, "actor": actor, "kind": EventRedispatched,
		})
		var err error
		stuck, err = pgx.CollectRows(rows, pgx.RowToStructByName[Operation])
		if err != nil {
			return fmt.Errorf("find stuck operations: %w", err)
		}
		for _, op := range stuck {
			subject, err := s.dispatchSubject(op.Provider)
			if err != nil {
				return err
			}
			m := DispatchMessage{Subject: subject, OperationID: op.ID, Version: op.Version, RepublishedAt: now}
			if err := s.insertOutbox(ctx, tx, m.Outbox()); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return stuck, nil
}

// operationConfirmClaim is the check a worker makes right before every
// provider call: the claim is still its own (same version, owner and
// status: nobody expired, settled or re-claimed it), its lease now lasts
// at least @hold_us microseconds past the database's clock (the call's full
// timeout plus a margin), and the approval and the requesting token still
// stand, the approval granted for the target the call goes to (@account,
// @environment; see operationLapse). The version bumps, so any writer
// holding the version read before (a sweeper that found the old lease expired) is fenced. clock_timestamp,
// not now(): a shared batch's transaction may have started before the
// worker asked, and the worker measures from when it asked.
const operationConfirmClaim = `WITH clock AS (
    SELECT coalesce(@now::timestamptz, clock_timestamp()) AS now
), upd AS (
    UPDATE operations SET
        version          = version + 1,
        lease_expires_at = greatest(lease_expires_at, clock.now + @hold_us::bigint * interval '1 microsecond')
    FROM clock
    WHERE id = @id AND version = @version AND status = 'dispatching' AND lease_owner = @owner
    RETURNING operations.version, operations.lease_expires_at, operations.approval_id, operations.requested_by, clock.now
)
SELECT u.version, u.lease_expires_at, u.now,
    operation_lapse(a, k, u.now, @account::text, @environment::text) AS lapse
FROM upd u
JOIN approvals a ON a.id = u.approval_id
JOIN api_tokens k ON k.id = u.requested_by`

var confirmClaimStmt = mustNamed(operationConfirmClaim)

// Confirmation is a worker's claim as the database confirmed it right
// before a provider call.
type Confirmation struct {
	// Version is the claim's new version; every later write of the worker
	// is conditional on it.
	Version int64 `db:"version"`
	// LeaseExpiresAt is the lease end, on the database's clock.
	LeaseExpiresAt time.Time `db:"lease_expires_at"`
	// Now is the database's clock when it confirmed.
	Now time.Time `db:"now"`
	// Lapse says whether the approval or the token lapsed meanwhile.
	Lapse Lapse `db:"lapse"`
}

// ConfirmClaim confirms that operation id, claimed by owner at version,
// is still that worker's claim, extends its lease to at least the
// database's now plus hold, and tells whether it may still be sent to at
// (the provider account and environment the call goes to). It
// returns ErrStale when the claim is no longer the worker's: then the
// worker must not call the provider. Concurrent confirmations share round
// trips and commits (see Record).
func (s *Store) ConfirmClaim(ctx context.Context, id uuid.UUID, version int64, owner string, hold time.Duration, at Target) (Confirmation, error) {
	var (
		conf       Confirmation
		confirmErr error
	)
	args, err := confirmClaimStmt.args(pgx.StrictNamedArgs{
		"id": id, "version": version, "owner": owner, "now": s.nowArg(), "hold_us": hold.Microseconds(),
		"account": at.Account, "environment": at.Environment,
	})
	if err != nil {
		return Confirmation{}, err
	}
	err = s.group.do(ctx, id, func(b *pgx.Batch) {
		b.Queue(confirmClaimStmt.SQL, args...).Query(func(rows pgx.Rows) error {
			c, err := pgx.CollectExactlyOneRow(rows, pgx.RowToStructByName[Confirmation])
			switch {
			case errors.Is(err, pgx.ErrNoRows):
				confirmErr = fmt.Errorf("%w: claim of %s at version %d by %s is no longer held", ErrStale, id, version, owner)
				return nil
			case err != nil:
				return fmt.Errorf("confirm claim of %s: %w", id, err)
			}
			conf, confirmErr = c, nil
			return nil
		})
	})
	if err != nil {
		return Confirmation{}, err
	}
	return conf, confirmErr
}

// OutcomeOpen reports whether an earlier attempt of operation id may have
// had an effect that no lookup has since excluded (Judgement.Open): then a
// refusal of a later attempt says nothing about whether the effect exists.
func (s *Store) OutcomeOpen(ctx context.Context, id uuid.UUID) (bool, error) {
	rows, _ := s.pool.Query(ctx, operationEventsInternal, id)
	events, err := pgx.CollectRows(rows, pgx.RowToStructByName[Event])
	if err != nil {
		return false, fmt.Errorf("read outcome history of %s: %w", id, err)
	}
	return Judge(events).Open(), nil
}

// operationEventsInternal is the history of operation $1 whatever its
// tenant, for workers acting on ids from the ledger's own messages.
const operationEventsInternal = `SELECT seq, at, kind, from_status, to_status, actor, detail
FROM operation_events WHERE operation_id = $1
ORDER BY seq`
