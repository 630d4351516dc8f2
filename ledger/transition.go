package ledger

import (
	"context"
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
	// Provider, when set, makes the change apply only to an operation of
	// that provider, judged in the same statement (ErrStale otherwise): a
	// claim taken on a dispatch message names the provider whose subject
	// carried it, and only the row says whose the operation is.
	Provider string
	// ProviderReference, when set, records the provider's reference.
	ProviderReference string
	// Review is required when To is review.
	Review *Review
	// CompensationReview, when set, is the review a compensation's
	// failure opens on the operation it compensates: if the changed
	// operation was created by a resolution's compensation
	// (EventCompensationFor), that operation goes to review
	// compensation_failed with this owner and deadline, linking both, in
	// the same transaction. The caller sets it on the changes that make a
	// compensation fail (rejected, retries exhausted); the ledger finds
	// the link.
	CompensationReview *Review
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

// operationTransitions runs transition_operations
// (schema/functions/transition_operations.sql): a set of changes, one per
// element of its arrays (ord is an element's 1-based position), each a
// conditional update on the operation's version and status that appends
// its event in the same statement. A change that does not apply (the version, status, provider,
// lease or pause condition fails) returns no row. Claims (@check_lapse) also get,
// from the same snapshot, whether the claimed operation may still be sent
// to their target (see operationLapse).
//
// One statement serves one change (Transition) and the changes of many
// workers sharing a commit (Claim, Record): the database plans and runs it,
// its constraints and its triggers once for all of them. Two changes of
// one operation in one set behave as they would one after the other: both
// fence on the version they saw, so at most one applies.
const operationTransitions = `SELECT o.*, ` + approvedByColumn + ` FROM transition_operations(
    p_id => @id, p_version => @version, p_from => @from, p_to => @to,
    p_lease_owner => @lease_owner, p_lease_until => @lease_until, p_lease_for_us => @lease_for_us,
    p_only_if_lease_expired => @only_if_lease_expired, p_unless_paused => @unless_paused,
    p_next_attempt_at => @next_attempt_at, p_attempted => @attempted, p_sent_at => @sent_at, p_sent_from => @sent_from,
    p_provider_reference => @provider_reference, p_flag => @flag,
    p_review_reason => @review_reason, p_review_owner => @review_owner, p_review_deadline => @review_deadline,
    p_reset_retry_budget => @reset_retry_budget, p_kind => @kind, p_actor => @actor, p_detail => @detail,
    p_approval_id => @approval_id, p_decision_reason => @decision_reason,
    p_check_lapse => @check_lapse, p_account => @account, p_environment => @environment,
    p_provider => @provider,
    p_now => @now, p_review_subject => @review_subject) o`

var transitionsStmt = mustNamed(operationTransitions)

// transition is one change on its way through operationTransitions: its
// row of the statement's arrays, and once the statement ran its result.
type transition struct {
	c      Change
	detail []byte
	// target, for a claim, is where the worker would send: the result
	// then says whether the operation may still be sent there.
	target *Target

	op    Operation
	lapse Lapse
	err   error // ErrStale when the change did not apply
}

// newTransition checks c against the transition table and the rules of
// its target state.
func newTransition(ctx context.Context, c Change, target *Target) (*transition, error) {
	c, err := withPersonDetail(ctx, c)
	if err != nil {
		return nil, err
	}
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
	return &transition{c: c, detail: detail, target: target}, nil
}

// transitionsArgs are operationTransitions' arguments for ts, in order.
func (s *Store) transitionsArgs(ts []*transition) ([]any, error) {
	n := len(ts)
	var (
		ids, approvals                                 = make([]uuid.UUID, n), make([]*uuid.UUID, n)
		versions, leaseFor                             = make([]int64, n), make([]int64, n)
		from, to, kind, actor                          = make([]string, n), make([]string, n), make([]string, n), make([]string, n)
		leaseOwner, reference, flag, reason, owner     = make([]*string, n), make([]*string, n), make([]*string, n), make([]*string, n), make([]*string, n)
		decision, account, environment, provider       = make([]*string, n), make([]*string, n), make([]*string, n), make([]*string, n)
		leaseUntil, next, sentAt, sentFrom, deadline   = make([]*time.Time, n), make([]*time.Time, n), make([]*time.Time, n), make([]*time.Time, n), make([]*time.Time, n)
		onlyIfExpired, unlessPaused, attempted, resets = make([]bool, n), make([]bool, n), make([]bool, n), make([]bool, n)
		checkLapse                                     = make([]bool, n)
		details                                        = make([][]byte, n)
	)
	for i, t := range ts {
		c := t.c
		ids[i], versions[i], from[i], to[i] = c.ID, c.Version, string(c.From), string(c.To)
		leaseOwner[i], leaseUntil[i], leaseFor[i] = nullString(c.LeaseOwner), nullTime(c.LeaseUntil), c.LeaseFor.Microseconds()
		onlyIfExpired[i], unlessPaused[i] = c.OnlyIfLeaseExpired, c.UnlessPaused
		next[i], attempted[i], sentAt[i], sentFrom[i] = nullTime(c.NextAttemptAt), c.Attempted, nullTime(c.SentAt), nullTime(c.SentFrom)
		reference[i], flag[i] = nullString(c.ProviderReference), nullString(c.Flag)
		if c.Review != nil {
			r := string(c.Review.Reason)
			reason[i], owner[i], deadline[i] = &r, &c.Review.Owner, nullTime(c.Review.Deadline)
		}
		resets[i], kind[i], actor[i], details[i] = c.ResetRetryBudget, string(c.Kind), c.Actor, t.detail
		approvals[i], decision[i], provider[i] = nullUUID(c.ApprovalID), nullString(c.DecisionReason), nullString(c.Provider)
		if t.target != nil {
			checkLapse[i], account[i], environment[i] = true, &t.target.Account, &t.target.Environment
		}
	}
	return transitionsStmt.args(pgx.StrictNamedArgs{
		"id": ids, "version": versions, "from": from, "to": to, "now": s.nowArg(),
		"lease_owner": leaseOwner, "lease_until": leaseUntil, "lease_for_us": leaseFor,
		"only_if_lease_expired": onlyIfExpired, "unless_paused": unlessPaused,
		"next_attempt_at": next, "attempted": attempted, "sent_at": sentAt, "sent_from": sentFrom,
		"provider_reference": reference, "flag": flag,
		"review_reason": reason, "review_owner": owner, "review_deadline": deadline, "review_subject": s.reviewSubjectPrefix(),
		"reset_retry_budget": resets, "kind": kind, "actor": actor, "detail": details,
		"approval_id": approvals, "decision_reason": decision,
		"check_lapse": checkLapse, "account": account, "environment": environment,
		"provider": provider,
	})
}

// transitioned is a row of operationTransitions' result.
type transitioned struct {
	Operation
	Ord   int   `db:"ord"`
	Lapse Lapse `db:"lapse"`
}

// collectTransitions gives each of ts its result from rows: the operation
// after its change, or ErrStale. It may run again for the same ts (a
// shared batch that failed is retried alone), so it overwrites.
func collectTransitions(rows pgx.Rows, ts []*transition) error {
	results, err := pgx.CollectRows(rows, pgx.RowToStructByName[transitioned])
	if err != nil {
		err = fmt.Errorf("transition %d operation(s): %w", len(ts), err)
		for _, t := range ts {
			t.op, t.lapse, t.err = Operation{}, LapseNone, err
		}
		return err
	}
	applied := make([]bool, len(ts))
	for _, r := range results {
		t := ts[r.Ord-1]
		t.op, t.lapse, t.err = r.Operation, r.Lapse, nil
		applied[r.Ord-1] = true
	}
	for i, t := range ts {
		if !applied[i] {
			t.op, t.lapse = Operation{}, LapseNone
			t.err = fmt.Errorf("%w: %s at version %d is no longer %s", ErrStale, t.c.ID, t.c.Version, t.c.From)
		}
	}
	return nil
}

// Transition applies c with a conditional update on the operation's version
// and status and appends its event in the same statement. It returns the
// operation as it is after the change, ErrBadTransition if the table
// forbids the move, or ErrStale if the operation changed meanwhile (nothing
// is written then; record what the caller saw with AppendEvent). A change
// that leaves the operation waiting for a dispatch message (queued, or a
// retry or lookup scheduled) gets it in the same transaction.
func (s *Store) Transition(ctx context.Context, c Change) (Operation, error) {
	if !needsTx(c) {
		op, err := s.transitionOne(ctx, s.pool, c)
		if err == nil && s.notifies(op) {
			s.signalOutbox()
		}
		return op, err
	}
	var op Operation
	err := s.InTx(ctx, func(tx *Tx) error {
		var err error
		op, err = s.TransitionTx(ctx, tx, c)
		return err
	})
	return op, err
}

// TransitionTx is Transition inside the caller's ledger transaction tx:
// the change, its event and, when the operation now waits for one, its
// dispatch message commit with the caller's other writes.
func (s *Store) TransitionTx(ctx context.Context, tx *Tx, c Change) (Operation, error) {
	return s.transitionsTx(ctx, tx, c, nil)
}

// transitionsTx applies c and then each of then in tx, each to the
// operation as the one before left it, and writes the dispatch message of
// the state the last one leaves, if it waits for one: a state passed
// through on the way (unknown, then review) waits for nothing.
func (s *Store) transitionsTx(ctx context.Context, tx *Tx, c Change, then []Change) (Operation, error) {
	op, err := s.transitionOne(ctx, tx.tx, c)
	if err != nil {
		return Operation{}, err
	}
	tx.wroteOutbox = tx.wroteOutbox || s.notifies(op)
	for _, next := range then {
		next.ID, next.From, next.Version = op.ID, op.Status, op.Version
		if op, err = s.transitionOne(ctx, tx.tx, next); err != nil {
			return Operation{}, err
		}
		tx.wroteOutbox = tx.wroteOutbox || s.notifies(op)
	}
	if waitsForDispatch(op) {
		if err := s.dispatchAfter(ctx, tx, op); err != nil {
			return Operation{}, err
		}
	}
	for _, ch := range append([]Change{c}, then...) {
		if ch.CompensationReview != nil {
			if err := s.compensationFailed(ctx, tx, op, *ch.CompensationReview); err != nil {
				return Operation{}, err
			}
			break
		}
	}
	return op, nil
}

// transitionOne runs c alone through operationTransitions on db.
func (s *Store) transitionOne(ctx context.Context, db DBTX, c Change) (Operation, error) {
	t, err := newTransition(ctx, c, nil)
	if err != nil {
		return Operation{}, err
	}
	ts := []*transition{t}
	args, err := s.transitionsArgs(ts)
	if err != nil {
		return Operation{}, err
	}
	rows, _ := db.Query(ctx, transitionsStmt.SQL, args...)
	if err := collectTransitions(rows, ts); err != nil {
		return Operation{}, err
	}
	return t.op, t.err
}

// Claim is Transition for a claim (c.To is dispatching) that also tells,
// in the same statement, whether the claimed operation may still be sent
// (see CheckLapse) to at, the provider account and environment the worker
// would call: an approval granted for another lapses as
// LapseApprovalMismatch. It is the dispatcher's hot path, so concurrent
// claims share one statement and one commit (see Record).
func (s *Store) Claim(ctx context.Context, c Change, at Target) (Operation, Lapse, error) {
	if c.To != StatusDispatching {
		return Operation{}, LapseNone, fmt.Errorf("claim must move to %s, not %s", StatusDispatching, c.To)
	}
	t, err := newTransition(ctx, c, &at)
	if err != nil {
		return Operation{}, LapseNone, err
	}
	if err := s.group.doSet(ctx, c.ID, s.transitions, t); err != nil {
		return Operation{}, LapseNone, err
	}
	return t.op, t.lapse, t.err
}

// Record is Transition in a transaction of its own, for a writer that has
// nothing else to commit with it, followed by each change of then, in
// order, in the same transaction: each applies to the operation as the one
// before left it (its ID, From and Version are filled in), e.g. unknown
// and then review, so the history keeps both. A lone change that needs no
// dispatch message shares one statement and one commit with concurrent
// calls: each returns once its change is committed, and a change that fails
// never makes another fail. It returns the operation after the last change.
func (s *Store) Record(ctx context.Context, c Change, then ...Change) (Operation, error) {
	if len(then) > 0 || needsTx(c) {
		var op Operation
		err := s.InTx(ctx, func(tx *Tx) error {
			var err error
			op, err = s.transitionsTx(ctx, tx, c, then)
			return err
		})
		return op, err
	}
	t, err := newTransition(ctx, c, nil)
	if err != nil {
		return Operation{}, err
	}
	if err := s.group.doSet(ctx, c.ID, s.transitions, t); err != nil {
		return Operation{}, err
	}
	if t.err == nil && s.notifies(t.op) {
		s.signalOutbox()
	}
	return t.op, t.err
}

// queueTransitions is the transitions writeSet's queue: one
// operationTransitions statement for every change of a shared batch.
func (s *Store) queueTransitions(b *pgx.Batch, items []any) error {
	ts := make([]*transition, len(items))
	for i, item := range items {
		ts[i] = item.(*transition)
	}
	args, err := s.transitionsArgs(ts)
	if err != nil {
		return err
	}
	b.Queue(transitionsStmt.SQL, args...).Query(func(rows pgx.Rows) error {
		return collectTransitions(rows, ts)
	})
	return nil
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
