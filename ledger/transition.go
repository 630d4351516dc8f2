package ledger

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
)

// Change describes one state change of one operation. From and Version are
// what the writer last saw; the change applies only if both still hold.
type Change struct {
	ID      uuid.UUID
	From    Status
	Version int64
	To      Status

	Kind   EventKind // event kind, e.g. "claimed", "provider_answered", "approval_revoked"
	Actor  string    // who or what: "worker:<id>", "operator:<token name>", "system"
	Detail any       // evidence, stored as JSON

	// LeaseOwner and a lease end (LeaseFor, or LeaseUntil) are required
	// when To is dispatching and cleared otherwise.
	LeaseOwner string
	// LeaseFor makes the lease end the database's clock plus LeaseFor,
	// taken in the statement that claims: a worker's own clock, or the
	// time its claim waited for a shared commit, never lengthens a lease.
	// The claim's RETURNING gives the end the worker must keep to.
	LeaseFor time.Duration
	// LeaseUntil is an absolute lease end, for callers that have one.
	LeaseUntil time.Time
	// OnlyIfLeaseExpired makes the change apply only while the claim's
	// lease has expired, judged in the same statement: a sweeper never
	// takes an operation away from a worker that has just extended its
	// lease.
	OnlyIfLeaseExpired bool
	// NextAttemptAt schedules the next attempt (retry_wait) or lookup
	// (unknown); zero clears it.
	NextAttemptAt time.Time
	// Attempted counts one more provider attempt.
	Attempted bool
	// SentAt, when set, is the latest moment a request may still have
	// been in flight at the provider (when its definite answer came; for
	// an unknown outcome the call's deadline, its start plus the
	// provider's full timeout; or the end of an expired lease); it sets
	// last_sent_at. Lookups believe "absent" only visibility_lag
	// after it.
	SentAt time.Time
	// SentFrom, when set, is the earliest moment the request may have
	// reached the provider (the call's start, or the claim); the first
	// time anything is sent it sets first_sent_at, from which the
	// provider's idempotency retention counts. Zero means SentAt.
	SentFrom time.Time
	// UnlessPaused makes the change (a claim) fail as ErrStale while a
	// dispatch pause matches the operation; the check is in the same
	// statement, so a pause takes effect at once.
	UnlessPaused bool
	// ProviderReference, when set, records the provider's reference.
	ProviderReference string
	// Review is required when To is review.
	Review *Review
	// ResetRetryBudget starts a fresh retry budget (an operator's retry):
	// the provider's max_attempts and max_elapsed count from now.
	ResetRetryBudget bool
	// Flag, when set, is added to the operation's flags
	// (e.g. "late_success_after_expiry").
	Flag string
	// ApprovalID, when set, is the approval the operation now runs under
	// (a proposal approved: awaiting_approval → queued).
	ApprovalID uuid.UUID
	// DecisionReason, when set, is why a person declined a proposal; the
	// summary repeats it.
	DecisionReason string
}

// Review says why an operation needs a person, who owns it and by when.
type Review struct {
	Reason   ReviewReason
	Owner    string
	Deadline time.Time
}

const operationTransition = `WITH upd AS (
    UPDATE operations SET
        status             = @to,
        version            = version + 1,
        updated_at         = coalesce(@now::timestamptz, now()),
        lease_owner        = CASE WHEN @to = 'dispatching' THEN @lease_owner END,
        lease_expires_at   = CASE WHEN @to = 'dispatching'
                                  THEN coalesce(@lease_until::timestamptz, coalesce(@now::timestamptz, now()) + @lease_for_us::bigint * interval '1 microsecond') END,
        next_attempt_at    = @next_attempt_at,
        attempts           = attempts + CASE WHEN @attempted THEN 1 ELSE 0 END,
        first_sent_at      = coalesce(first_sent_at, CASE WHEN @sent_at::timestamptz IS NOT NULL THEN coalesce(@sent_from::timestamptz, @sent_at::timestamptz) END),
        last_sent_at       = coalesce(@sent_at::timestamptz, last_sent_at),
        provider_reference = coalesce(@provider_reference, provider_reference),
        review_reason      = CASE WHEN @to = 'review' THEN @review_reason END,
        review_owner       = CASE WHEN @to = 'review' THEN @review_owner END,
        review_deadline    = CASE WHEN @to = 'review' THEN @review_deadline::timestamptz END,
        retry_base         = CASE WHEN @reset_retry_budget THEN attempts ELSE retry_base END,
        retry_since        = CASE WHEN @reset_retry_budget THEN coalesce(@now::timestamptz, now()) ELSE retry_since END,
        flags              = CASE WHEN @flag::text IS NULL OR @flag = ANY (flags) THEN flags ELSE flags || @flag::text END,
        approval_id        = coalesce(@approval_id::uuid, approval_id),
        decision_reason    = coalesce(@decision_reason::text, decision_reason)
    WHERE id = @id AND version = @version AND status = @from
      AND NOT (@only_if_lease_expired::boolean AND lease_expires_at >= coalesce(@now::timestamptz, now()))
      AND NOT (@unless_paused AND EXISTS (
          SELECT 1 FROM dispatch_pauses p
          WHERE p.tenant_id = operations.tenant_id
            AND (p.provider IS NULL OR p.provider = operations.provider)
            AND (p.action IS NULL OR p.action = operations.action)))
    RETURNING *
), ev AS (
    INSERT INTO operation_events (operation_id, tenant_id, at, kind, from_status, to_status, actor, detail)
    SELECT id, tenant_id, updated_at, @kind, @from, @to, @actor, @detail FROM upd
), review AS (
    -- Every review item is also announced on the review stream, through the
    -- outbox, in this same statement.
    INSERT INTO outbox (subject, msg_id, payload)
    SELECT @review_subject || '.' || u.tenant_id::text || '.' || u.review_reason,
           'review.' || u.id || '.' || u.version,
           convert_to(json_build_object(
               'operation_id', u.id, 'tenant', t.name, 'action', u.action, 'key', u.key,
               'provider', u.provider, 'reason', u.review_reason, 'owner', u.review_owner,
               'deadline', u.review_deadline, 'version', u.version, 'at', u.updated_at)::text, 'UTF8')
    FROM upd u JOIN tenants t ON t.id = u.tenant_id
    WHERE u.status = 'review' AND @review_subject::text <> ''
)
SELECT ` + operationColumns + `
FROM upd o JOIN tenants t ON t.id = o.tenant_id`

var transitionStmt = mustNamed(operationTransition)

// Transition applies c with a conditional update on the operation's version
// and status and appends its event in the same statement. It returns the
// operation as it is after the change, ErrBadTransition if the table
// forbids the move, or ErrStale if the operation changed meanwhile (nothing
// is written then; record what the caller saw with AppendEvent).
func (s *Store) Transition(ctx context.Context, db DBTX, c Change) (Operation, error) {
	args, err := s.transitionArgs(c)
	if err != nil {
		return Operation{}, err
	}
	rows, _ := db.Query(ctx, transitionStmt.SQL, args...)
	return collectTransition(rows, c)
}

// Claim is Transition for a claim (c.To is dispatching) that also tells,
// in the same round trip and the same transaction, whether the claimed
// operation may still be sent (see CheckLapse) to at, the provider account
// and environment the worker would call: an approval granted for another
// lapses as LapseApprovalMismatch. It is the dispatcher's hot
// path, so concurrent claims share round trips and commits (see Record).
func (s *Store) Claim(ctx context.Context, c Change, at Target) (Operation, Lapse, error) {
	if c.To != StatusDispatching {
		return Operation{}, LapseNone, fmt.Errorf("claim must move to %s, not %s", StatusDispatching, c.To)
	}
	args, err := s.transitionArgs(c)
	if err != nil {
		return Operation{}, LapseNone, err
	}
	var (
		op       Operation
		lapse    Lapse
		claimErr error
	)
	err = s.group.do(ctx, c.ID, func(b *pgx.Batch) {
		b.Queue(transitionStmt.SQL, args...).Query(func(rows pgx.Rows) error {
			op, claimErr = collectTransition(rows, c)
			return unlessStale(claimErr)
		})
		b.Queue(operationLapse, c.ID, s.nowArg(), at.Account, at.Environment).QueryRow(func(row pgx.Row) error {
			lapse = LapseNone
			if err := row.Scan(&lapse); err != nil && !errors.Is(err, pgx.ErrNoRows) {
				return fmt.Errorf("check approval of %s: %w", c.ID, err)
			}
			return nil
		})
	})
	if err != nil {
		return Operation{}, LapseNone, err
	}
	return op, lapse, claimErr
}

// Record is Transition in a transaction of its own, for a writer that has
// nothing else to commit with it. Concurrent calls share round trips and
// commits: each returns once its change is committed, and a change that
// fails never makes another fail.
func (s *Store) Record(ctx context.Context, c Change) (Operation, error) {
	args, err := s.transitionArgs(c)
	if err != nil {
		return Operation{}, err
	}
	var (
		op        Operation
		recordErr error
	)
	err = s.group.do(ctx, c.ID, func(b *pgx.Batch) {
		b.Queue(transitionStmt.SQL, args...).Query(func(rows pgx.Rows) error {
			op, recordErr = collectTransition(rows, c)
			return unlessStale(recordErr)
		})
	})
	if err != nil {
		return Operation{}, err
	}
	return op, recordErr
}

// unlessStale passes on a statement's error unless it is ErrStale, which
// is an answer, not a failure: the batch it ran in still commits.
func unlessStale(err error) error {
	if errors.Is(err, ErrStale) {
		return nil
	}
	return err
}

// transitionArgs checks c against the transition table and the rules of
// its target state, and returns operationTransition's arguments.
func (s *Store) transitionArgs(c Change) ([]any, error) {
	if !c.From.CanMoveTo(c.To) {
		return nil, fmt.Errorf("%w: %s → %s", ErrBadTransition, c.From, c.To)
	}
	if c.To == StatusDispatching && (c.LeaseOwner == "" || (c.LeaseUntil.IsZero() && c.LeaseFor <= 0)) {
		return nil, fmt.Errorf("transition to dispatching needs a lease owner and expiry")
	}
	if c.To == StatusReview && (c.Review == nil || c.Review.Reason == "" || c.Review.Owner == "") {
		return nil, fmt.Errorf("transition to review needs a reason and an owner")
	}
	detail, err := marshalDetail(c.Detail)
	if err != nil {
		return nil, err
	}
	var reason *ReviewReason
	var owner *string
	var deadline *time.Time
	if c.Review != nil {
		reason, owner = &c.Review.Reason, &c.Review.Owner
		if !c.Review.Deadline.IsZero() {
			deadline = &c.Review.Deadline
		}
	}
	return transitionStmt.args(pgx.StrictNamedArgs{
		"id": c.ID, "version": c.Version, "from": c.From, "to": c.To, "now": s.nowArg(),
		"lease_owner": nullString(c.LeaseOwner), "lease_until": nullTime(c.LeaseUntil), "lease_for_us": c.LeaseFor.Microseconds(),
		"only_if_lease_expired": c.OnlyIfLeaseExpired, "unless_paused": c.UnlessPaused,
		"next_attempt_at": nullTime(c.NextAttemptAt), "attempted": c.Attempted,
		"sent_at": nullTime(c.SentAt), "sent_from": nullTime(c.SentFrom),
		"provider_reference": nullString(c.ProviderReference), "flag": nullString(c.Flag),
		"review_reason": reason, "review_owner": owner, "review_deadline": deadline, "review_subject": s.reviewSubject,
		"reset_retry_budget": c.ResetRetryBudget, "kind": c.Kind, "actor": c.Actor, "detail": detail,
		"approval_id": nullUUID(c.ApprovalID), "decision_reason": nullString(c.DecisionReason),
	})
}

// collectTransition reads operationTransition's result: the operation
// after c, or ErrStale when the conditional update matched nothing.
func collectTransition(rows pgx.Rows, c Change) (Operation, error) {
	op, err := pgx.CollectExactlyOneRow(rows, pgx.RowToStructByName[Operation])
	if errors.Is(err, pgx.ErrNoRows) {
		return Operation{}, fmt.Errorf("%w: %s at version %d is no longer %s", ErrStale, c.ID, c.Version, c.From)
	}
	if err != nil {
		return Operation{}, fmt.Errorf("transition %s %s → %s: %w", c.ID, c.From, c.To, err)
	}
	return op, nil
}

func nullString(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

func nullUUID(id uuid.UUID) *uuid.UUID {
	if id == uuid.Nil {
		return nil
	}
	return &id
}

func nullTime(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	return &t
}
