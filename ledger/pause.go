package ledger

import (
	"context"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
)

// Pause is an active stop-button entry: no operation of the tenant that
// matches it (empty provider or action matches any) is claimed.
type Pause struct {
	Provider string    `json:"provider,omitempty"`
	Action   string    `json:"action,omitempty"`
	PausedBy string    `json:"paused_by"`
	PausedAt time.Time `json:"paused_at"`
	// Reason is empty for an operator's stop button and PauseLedgerBehind
	// for the pause actledger makes when the ledger is behind its
	// messages; Detail then names the message that proved it.
	Reason string `json:"reason,omitempty"`
	Detail string `json:"detail,omitempty"`
}

// waitsForMessage holds for an operation o that no pause covers and whose
// dispatch message is not waiting in the outbox: one that only a new
// message will move.
//
// A waiting message is found by the operation id its msg_id spells
// (dispatch.<id>.<version>; a uuid holds no '.'), compared by equality:
// the planner then reads the unpublished dispatch messages once into a
// hash and probes it for each operation (Hash Anti Join). Matched with
// LIKE 'dispatch.' || o.id || '.%' instead, every operation a sweep or a
// resume looks at read the whole unpublished backlog again, candidates
// times backlog (docs/benchmarks.md, "Measurements the code's comments
// point to"), and a backlog grows exactly when the relay cannot publish.
//
// The pauses are looked up per operation (a subquery the planner keeps as
// one, not an anti-join): as an anti-join its estimate of what survives
// was a single row whatever the pauses, so a resume's batch, oldest first
// under a limit, sorted every unsent operation of the tenant instead of
// walking operations_unsent_list_idx and reading the batch's own rows
// (docs/benchmarks.md, "The large stage", "What the stage showed, and
// what changed"). The pauses are a handful of rows.
const waitsForMessage = `NOT EXISTS (
      SELECT 1 FROM outbox b
      WHERE b.published_at IS NULL AND b.msg_id LIKE '` + dispatchMsgIDPrefix + `%.%'
        AND split_part(b.msg_id, '.', 2) = o.id::text)
  AND NOT (SELECT EXISTS (
      SELECT 1 FROM dispatch_pauses p
      WHERE p.tenant_id = o.tenant_id
        AND (p.provider IS NULL OR p.provider = o.provider)
        AND (p.action IS NULL OR p.action = o.action)))`

const (
	// pauseInsert adds an operator's pause. A pause already there of the
	// same scope stays as it is, unless it is the one actledger made
	// because the ledger is behind: the operator then takes it over, so
	// that a recovery, which lifts actledger's own, leaves it holding
	// (pausesClearLedgerBehind).
	pauseInsert = `INSERT INTO dispatch_pauses (tenant_id, provider, action, paused_by, paused_at)
VALUES ($1, $2, $3, $4, coalesce($5::timestamptz, now()))
ON CONFLICT (tenant_id, coalesce(provider, ''), coalesce(action, '')) DO UPDATE SET paused_by = EXCLUDED.paused_by
WHERE dispatch_pauses.reason = '` + PauseLedgerBehind + `' AND dispatch_pauses.paused_by = '` + ledgerBehindActor + `'`

	// pausesDeleteWithin removes every pause of the tenant that lies within
	// the scope $2 (provider), $3 (action), where '' matches any: a pause of
	// one provider lies within a scope of any provider, but a pause of every
	// provider does not lie within a scope that names one.
	pausesDeleteWithin = `DELETE FROM dispatch_pauses
WHERE tenant_id = $1 AND ($2 = '' OR provider = $2) AND ($3 = '' OR action = $3)`

	// pausesList is bounded by what may be paused (one pause per
	// configured provider and action, and their combinations), and by
	// MaxPauses whatever the configuration.
	pausesList = `SELECT coalesce(provider, '') AS provider, coalesce(action, '') AS action, paused_by, paused_at,
  coalesce(reason, '') AS reason, coalesce(detail, '') AS detail
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
	operationsReleasable = `SELECT o.id, o.version, o.provider, o.status, o.next_attempt_at, o.created_at, o.traceparent FROM operations o
WHERE o.tenant_id = @tenant
  AND (@provider = '' OR o.provider = @provider) AND (@action = '' OR o.action = @action)
  AND o.status IN (` + waitsNowSQL + `, ` + waitsScheduledSQL + `)
  AND ` + waitsForMessage + `
  AND (@after_at::timestamptz IS NULL OR (o.created_at, o.id) > (@after_at, @after_id))
ORDER BY o.created_at, o.id
LIMIT @limit`
)

// PauseDispatch stops claims of the tenant's operations for provider and/or
// action (empty means any). Work already in flight finishes. A pause holds
// every scope's work of the tenant, so only a caller of the whole tenant
// may pause: one with a scope gets ErrWholeTenantOnly.
func (s *Store) PauseDispatch(ctx context.Context, in Access, provider, action, actor string) error {
	if in.Scope != "" {
		return fmt.Errorf("%w: a pause holds the work of every scope of the tenant", ErrWholeTenantOnly)
	}
	if _, err := s.pool.Exec(ctx, pauseInsert, in.Tenant, nullString(provider), nullString(action), actor, s.nowArg()); err != nil {
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
	// Traceparent is the operation's trace context, which its message
	// carries.
	Traceparent *string `db:"traceparent"`
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
	m := DispatchMessage{Subject: subject, OperationID: r.ID, Version: r.Version, RepublishedAt: at, Traceparent: deref(r.Traceparent),
		DeliverAfter: DispatchDue(r.Status, r.NextAttemptAt)}
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
// waits, so a resume can be repeated safely. As PauseDispatch, it is for a
// caller of the whole tenant only (ErrWholeTenantOnly).
func (s *Store) ResumeDispatch(ctx context.Context, in Access, provider, action string) (removed, released int, err error) {
	if in.Scope != "" {
		return 0, 0, fmt.Errorf("%w: a resume releases the work of every scope of the tenant", ErrWholeTenantOnly)
	}
	released, err = s.releaseWaiting(ctx, in.Tenant, provider, action, func(tx *Tx) error {
		tag, err := tx.tx.Exec(ctx, pausesDeleteWithin, in.Tenant, provider, action)
		if err != nil {
			return fmt.Errorf("resume dispatch: %w", err)
		}
		removed = int(tag.RowsAffected())
		return nil
	})
	if err != nil && released == 0 && removed > 0 {
		// The first batch rolled back with the pauses' removal.
		removed = 0
	}
	return removed, released, err
}

// releaseWaiting writes the dispatch messages of tenant's operations of
// the scope provider, action ("" matches any) that no pause covers and that
// wait for one (operationsReleasable), in batches of Config.ResumeBatch,
// oldest first, each in its own transaction; first, when set, runs in the
// first batch's transaction (the removal of the pauses that held them).
// released counts the operations of the committed batches.
func (s *Store) releaseWaiting(ctx context.Context, tenant uuid.UUID, provider, action string, first func(tx *Tx) error) (released int, err error) {
	var afterAt *time.Time
	var afterID uuid.UUID
	now := s.Now()
	for batch := 0; ; batch++ {
		n := 0
		err = s.InTx(ctx, func(tx *Tx) error {
			if batch == 0 && first != nil {
				if err := first(tx); err != nil {
					return err
				}
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
				return released, fmt.Errorf("resume dispatch: pauses removed and %d batch(es) released, then: %w", batch, err)
			}
			return 0, err
		}
		released += n
		if n < s.resumeBatch {
			return released, nil
		}
	}
}

// MaxPauses bounds the pauses Pauses lists.
const (
	MaxPauses    = 500
	maxPausesSQL = "500"
)

// Pauses lists the tenant's active pauses (at most MaxPauses). Every scope
// sees them: they hold its work too, and only callers of the whole tenant
// make them.
func (s *Store) Pauses(ctx context.Context, tenant uuid.UUID) ([]Pause, error) {
	rows, _ := s.pool.Query(ctx, pausesList, tenant)
	pauses, err := pgx.CollectRows(rows, pgx.RowToStructByName[Pause])
	if err != nil {
		return nil, fmt.Errorf("list pauses: %w", err)
	}
	return pauses, nil
}
