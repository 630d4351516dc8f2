package dispatcher

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/google/uuid"
	"github.com/sethvargo/go-retry"

	"github.com/actledger/actledger/broker"
	"github.com/actledger/actledger/ledger"
	"github.com/actledger/actledger/provider"
)

// errCrashed is returned when the crashAfterCall test hook simulated a
// killed worker.
var errCrashed = errors.New("dispatcher: worker crashed (test hook)")

// errNoTimeToCall is returned when the worker could not confirm its claim
// quickly enough for a call to fit in the lease it got: nothing is called,
// and the lease runs out into the sweeper's hands.
var errNoTimeToCall = errors.New("dispatcher: could not confirm the claim in time for a call to fit in the lease")

// Execute does what the ledger says the operation of dispatch message m
// (from providerName's consumer) needs now: a first or retried create
// (queued, retry_wait), or settling an unknown outcome (unknown). Anything
// else, or an operation claimed by another worker, or paused, is left
// alone. It returns an error only when the ledger could not be read or
// written.
func (d *Dispatcher) Execute(ctx context.Context, providerName string, m ledger.Dispatch) error {
	return d.execute(ctx, providerName, m, nil)
}

// execute is Execute with callsDone, which, when set, is told once the
// operation will call its provider no more in this run (see
// work.callsDone).
func (d *Dispatcher) execute(ctx context.Context, providerName string, m ledger.Dispatch, callsDone func()) error {
	pc, ok := d.configs[providerName]
	if !ok {
		return fmt.Errorf("dispatch message from provider %q, which is not configured", providerName)
	}
	if m.Version == 1 {
		// Every operation is created queued at version 1, so the message
		// of a new operation can be claimed without reading it first: the
		// claim's conditions say whether it is still so, and whether it
		// is this consumer's provider's at all (a claim records the
		// provider's account and environment and judges the approval
		// against them, and a message on another provider's subject,
		// misrouted or published by anyone who can reach the stream, is
		// only a pointer: the row says whose the operation is).
		c, err := d.claim(ctx, pc, m.OperationID, ledger.StatusQueued, 1)
		if err == nil {
			return d.run(ctx, c, ledger.StatusQueued, callsDone)
		}
		if !errors.Is(err, ledger.ErrStale) {
			return err
		}
		// It moved on, its dispatch is paused, or it is another
		// provider's: read what it needs now.
	}
	op, err := d.store.GetInternal(ctx, m.OperationID)
	if err != nil {
		return err
	}
	now := d.store.Now()
	switch op.Status {
	case ledger.StatusQueued:
	case ledger.StatusRetryWait, ledger.StatusUnknown:
		if op.NextAttemptAt != nil && op.NextAttemptAt.After(now.Add(50*time.Millisecond)) {
			// Early (a duplicate or a sweep): the scheduled message will come.
			return nil
		}
	default:
		return nil
	}
	if op.Provider != pc.Name {
		// Not this consumer's to send: if the operation still waits, the
		// sweeper re-publishes it on its own provider's subject.
		d.log.ErrorContext(ctx, "dispatch message on another provider's subject dropped",
			"operation_id", op.ID, "provider", op.Provider, "subject_provider", pc.Name)
		return nil
	}
	c, err := d.claim(ctx, pc, op.ID, op.Status, op.Version)
	if errors.Is(err, ledger.ErrStale) {
		// Another worker has it, it moved on, or its dispatch is paused
		// (a resume re-publishes it).
		return nil
	}
	if err != nil {
		return err
	}
	return d.run(ctx, c, op.Status, callsDone)
}

// claimed is a claim as its statement answered it.
type claimed struct {
	op    ledger.Operation // status dispatching; LeaseExpiresAt is on the database's clock
	lapse ledger.Lapse
	// slot is the claim's own room for a first call: the claiming
	// statement is a conditional write on the version that also read the
	// approval, so right after it no confirmation is needed if the call
	// still fits in the lease.
	slot callSlot
}

// claim takes the operation for this worker for one lease, unless a pause
// covers it, and says whether it may still be sent. The lease ends
// LeaseDuration after the database's clock in the claiming statement; the
// claimed operation carries that end. The claim records the provider
// account and environment it is for: if the worker stops reporting, its
// call may have reached them.
func (d *Dispatcher) claim(ctx context.Context, pc *provider.Config, id uuid.UUID, from ledger.Status, version int64) (claimed, error) {
	asked := time.Now()
	op, lapse, err := d.store.Claim(ctx, ledger.Change{
		ID: id, From: from, Version: version, To: ledger.StatusDispatching,
		Kind: "claimed", Actor: d.actor(), UnlessPaused: true, Provider: pc.Name,
		LeaseOwner: d.cfg.WorkerID, LeaseFor: d.cfg.LeaseDuration,
		Detail: map[string]any{"lease_seconds": d.cfg.LeaseDuration.Seconds(), "account": pc.Account, "environment": pc.Environment},
	}, targetOf(pc))
	if err != nil {
		return claimed{}, err
	}
	if hold := d.afterClaim.Load(); hold != nil {
		(*hold)(op)
	}
	// The claim's updated_at is the database's clock in its transaction,
	// which began after this worker asked.
	return claimed{op: op, lapse: lapse, slot: callSlot{confirmed: op.UpdatedAt, asked: asked}}, nil
}

// run works on an operation this worker has claimed from status from;
// callsDone, when set, is told once it will call its provider no more.
func (d *Dispatcher) run(ctx context.Context, c claimed, from ledger.Status, callsDone func()) error {
	claimed, lapse := c.op, c.lapse
	pc, ok := d.configs[claimed.Provider]
	if !ok {
		// Cannot happen while dispatch subjects follow the operations'
		// providers; if it does, the lease runs out and the sweeper takes
		// the operation over.
		return fmt.Errorf("operation %s names provider %q, which is not configured", claimed.ID, claimed.Provider)
	}
	log := d.log.With("operation_id", claimed.ID, "tenant", claimed.Tenant, "provider", claimed.Provider, "action", claimed.Action)
	w := &work{
		store: d.store, broker: d.broker, actor: d.actor(), log: log, crashAfterCall: deref(d.crashAfterCall.Load()), stallAfterCall: deref(d.stallAfterCall.Load()), onAttempt: d.cfg.OnAttempt,
		op: claimed, pc: pc, p: d.providers[claimed.Provider], lapse: lapse, fencedIsEvidence: true,
		owner: d.cfg.WorkerID, margin: d.cfg.CallMargin, settling: from == ledger.StatusUnknown, fresh: &c.slot,
		calls: d.calls[claimed.Provider], callsDone: callsDone,
	}
	if from == ledger.StatusUnknown {
		return w.settleUnknown(ctx)
	}
	if lapse != ledger.LapseNone {
		return w.lapsed(ctx)
	}
	return w.create(ctx)
}

// targetOf is where pc's calls create effects: an approval granted for
// another account or environment does not let the worker call.
func targetOf(pc *provider.Config) ledger.Target {
	return ledger.Target{Account: pc.Account, Environment: pc.Environment}
}

func (d *Dispatcher) actor() string { return "worker:" + d.cfg.WorkerID }

// work is one claimed operation on its way to its next state.
type work struct {
	store          *ledger.Store
	broker         *broker.Broker
	actor          string
	log            *slog.Logger
	crashAfterCall func(ledger.Operation) bool
	stallAfterCall func(ledger.Operation)
	onAttempt      func(string, provider.Class)

	op    ledger.Operation // as claimed: status dispatching, its version fences every write
	pc    *provider.Config
	p     provider.Provider
	lapse ledger.Lapse
	// fencedIsEvidence: a worker that lost its lease keeps what it saw as
	// an evidence event; a sweeper that lost a race has nothing to keep.
	fencedIsEvidence bool

	// owner is the lease owner of a worker's claim; margin is what a
	// call's full timeout must leave of the lease (Config.CallMargin).
	owner  string
	margin time.Duration
	// settling: the claim was taken from unknown, so an earlier attempt
	// may have had an effect.
	settling bool
	// fresh, until the first call, is the claim's own slot (see claimed).
	fresh *callSlot
	// calls are the provider's call slots (Dispatcher.calls): one is held
	// for each create or lookup, from before its claim is confirmed until
	// the call returns, so the answer is recorded with the slot free.
	calls chan struct{}
	// holding: this work holds one of calls.
	holding bool
	// callsDone, when set, is called once a create has returned: no call
	// follows a create in the same work, only the recording of its
	// answer. The consumer then frees the message's room in its worker
	// pool (see Dispatcher.consume), so an answer waiting for its commit
	// does not hold back the next message's claim.
	callsDone func()
}

// takeCall waits for one of the provider's call slots. It runs before
// startCall, so the claim is confirmed, and its lease judged, after the
// wait, right before the call. Work without slots (the lease sweeper's,
// which calls no provider) is not limited.
func (w *work) takeCall(ctx context.Context) error {
	if w.calls == nil {
		return nil
	}
	select {
	case w.calls <- struct{}{}:
		w.holding = true
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// releaseCall hands the slot on, if this work holds one.
func (w *work) releaseCall() {
	if w.holding {
		w.holding = false
		<-w.calls
	}
}

// callSlot is a confirmed claim's room for one provider call.
type callSlot struct {
	// confirmed is the database's clock when it confirmed the claim: no
	// call started after the confirmation reached the provider earlier.
	confirmed time.Time
	// asked is this process's clock (monotonic) when it asked: the
	// database's clock at any later local instant t is at most
	// confirmed + (t - asked).
	asked time.Time
}

// dbLatest is the latest the database's clock can read at local instant t.
func (s callSlot) dbLatest(t time.Time) time.Time { return s.confirmed.Add(t.Sub(s.asked)) }

// fits reports whether a call of timeout starting now, plus half the
// margin, ends before leaseEnd on the database's clock.
func (s callSlot) fits(timeout, margin time.Duration, leaseEnd time.Time) bool {
	return !s.dbLatest(time.Now()).Add(timeout + margin/2).After(leaseEnd)
}

// startCall returns the slot for the call about to start: the claim's own
// for the first call right after a claim, if the call still fits in the
// lease it got; otherwise a new confirmation (see confirm).
func (w *work) startCall(ctx context.Context) (callSlot, error) {
	if fresh := w.fresh; fresh != nil {
		w.fresh = nil
		if w.op.LeaseExpiresAt != nil && fresh.fits(w.pc.Timeout.Duration, w.margin, *w.op.LeaseExpiresAt) {
			return *fresh, nil
		}
	}
	return w.confirm(ctx)
}

// confirm runs right before every provider call. It checks that the claim
// is still this worker's (a superseded worker must never call), extends
// the lease so that the call's full timeout plus the margin fits before it
// ends on the database's clock (a provider keeps working after a client
// gives up, so only the full timeout bounds when the call's effect can
// land), and reads again whether the approval and the token still stand
// (w.lapse). It returns ledger.ErrStale when the claim is no longer the
// worker's.
func (w *work) confirm(ctx context.Context) (callSlot, error) {
	timeout := w.pc.Timeout.Duration
	for range 3 {
		asked := time.Now()
		conf, err := w.store.ConfirmClaim(ctx, w.op.ID, w.op.Version, w.owner, timeout+w.margin, targetOf(w.pc))
		if err != nil {
			return callSlot{}, err
		}
		w.op.Version, w.op.LeaseExpiresAt, w.lapse = conf.Version, &conf.LeaseExpiresAt, conf.Lapse
		slot := callSlot{confirmed: conf.Now, asked: asked}
		// The confirmation's own round trip eats into the margin; half of
		// it must be left when the call starts.
		if slot.fits(timeout, w.margin, conf.LeaseExpiresAt) {
			return slot, nil
		}
		w.log.WarnContext(ctx, "claim confirmed too late for a call to fit in the lease; confirming again",
			"lease_expires_at", conf.LeaseExpiresAt, "confirmed_at", conf.Now, "took", time.Since(asked))
	}
	return callSlot{}, errNoTimeToCall
}

// superseded reports (and logs) whether err says the claim is no longer
// this worker's.
func (w *work) superseded(ctx context.Context, err error, call string) bool {
	if !errors.Is(err, ledger.ErrStale) {
		return false
	}
	w.log.WarnContext(ctx, "claim superseded before the call; not calling the provider", "call", call, "version", w.op.Version)
	return true
}

// create sends the operation with its original external key and records
// the classified answer. It first confirms the claim (startCall): a
// superseded worker never calls, and an approval or token that lapsed
// meanwhile (even during a lookup under the same claim) stops the call.
func (w *work) create(ctx context.Context) error {
	if err := w.takeCall(ctx); err != nil {
		return err
	}
	defer w.releaseCall()
	slot, err := w.startCall(ctx)
	if w.superseded(ctx, err, "create") {
		return nil
	}
	if err != nil {
		return err
	}
	if w.lapse != ledger.LapseNone {
		return w.lapsed(ctx)
	}
	attempt := w.op.Attempts + 1
	start := time.Now()
	res := w.p.Create(ctx, provider.CreateRequest{ExternalKey: w.op.ExternalKey, Params: w.op.Params})
	if w.crashAfterCall != nil && w.crashAfterCall(w.op) {
		return errCrashed
	}
	w.releaseCall()
	if w.callsDone != nil {
		w.callsDone()
	}
	if w.stallAfterCall != nil {
		w.stallAfterCall(w.op)
	}
	if w.onAttempt != nil {
		w.onAttempt(w.op.Provider, res.Class)
	}
	evidence := attemptEvidence(attempt, res)
	w.log.InfoContext(ctx, "provider answered", "attempt", attempt, "class", res.Class, "http_status", res.HTTPStatus, "error", res.Error)
	c := ledger.Change{Kind: ledger.EventAttempt, Detail: evidence, Attempted: true}
	if res.Sent {
		// The request may have reached the provider from the moment the
		// claim was confirmed. A definite answer ends the request at the
		// provider; without one (a timeout, a lost response, a 5xx) the
		// provider may work on it until the call's full timeout has
		// passed, whenever the client gave up.
		c.SentFrom = slot.confirmed
		c.SentAt = slot.dbLatest(time.Now())
		if deadline := slot.dbLatest(start).Add(w.pc.Timeout.Duration); res.Class == provider.ClassUnknown && deadline.After(c.SentAt) {
			c.SentAt = deadline
		}
		// A resend answered at once ends before an earlier call whose
		// outcome is unknown may still land: the last send never moves
		// back.
		if w.op.LastSentAt != nil && w.op.LastSentAt.After(c.SentAt) {
			c.SentAt = *w.op.LastSentAt
		}
	}
	now := w.store.Now()
	switch res.Class {
	case provider.ClassSucceeded:
		c.To, c.ProviderReference = ledger.StatusSucceeded, res.ProviderReference
		return w.move(ctx, c)
	case provider.ClassRejected:
		// A definite refusal of a resend proves nothing about an earlier
		// attempt whose outcome was unknown, recorded or not (a lease that
		// expired counts no attempt): the resend may have been refused
		// before its key was looked at. Failed would tell the agent nothing
		// happened while the effect may exist.
		open, err := w.store.OutcomeOpen(ctx, w.op.ID)
		if err != nil {
			return err
		}
		if open {
			evidence["why"] = "the provider refused a resend, but an earlier attempt's outcome is unknown and may have had the effect"
			w.log.WarnContext(ctx, "resend refused after an unknown outcome; handing it to a person", "attempt", attempt, "http_status", res.HTTPStatus)
			c.To, c.Review = ledger.StatusReview, w.review(ledger.ReasonRejectedAfterUnknown, now)
			return w.move(ctx, c)
		}
		c.To = ledger.StatusFailed
		return w.move(ctx, c)
	case provider.ClassNotExecuted:
		// A resend refused before any effect says nothing about an
		// earlier attempt whose outcome is unknown: the operation is not
		// "confirmed not executed" (retry_wait, which a revoke would hold
		// as never sent). It stays unknown, the refusal's Retry-After
		// honoured before the next step.
		if w.settling {
			open, err := w.store.OutcomeOpen(ctx, w.op.ID)
			if err != nil {
				return err
			}
			if open {
				evidence["why"] = "the provider refused this resend before any effect, but an earlier attempt's outcome is still unknown"
				c.To, c.NextAttemptAt = ledger.StatusUnknown, now.Add(res.RetryAfter)
				w.op.Attempts = attempt
				if !c.SentAt.IsZero() {
					w.op.LastSentAt = &c.SentAt
					w.op.FirstSentAt = firstSentPtr(w.op, c.SentFrom)
				}
				return w.unknown(ctx, c, now)
			}
		}
		// The budget is judged at the time of the next attempt: a retry
		// that could only be sent after max_elapsed is not scheduled.
		next := now.Add(max(backoff(w.pc.Retry, attempt), res.RetryAfter))
		if w.exhausted(attempt, c.SentAt, next) {
			c.To, c.Review = ledger.StatusReview, w.review(ledger.ReasonRetriesExhausted, now)
			return w.move(ctx, c)
		}
		c.To, c.NextAttemptAt = ledger.StatusRetryWait, next
		return w.move(ctx, c)
	default: // provider.ClassUnknown
		c.To = ledger.StatusUnknown
		w.op.Attempts = attempt
		if !c.SentAt.IsZero() {
			w.op.LastSentAt = &c.SentAt
			w.op.FirstSentAt = firstSentPtr(w.op, c.SentFrom)
		}
		return w.unknown(ctx, c, now)
	}
}

// lapsed ends a claim whose approval or token lapsed before a create: an
// operation never sent with a possible effect is held (nothing happened);
// one whose earlier attempt's outcome was unknown goes to a person, as the
// lookup path does when the approval lapsed.
func (w *work) lapsed(ctx context.Context) error {
	if !w.settling {
		w.log.InfoContext(ctx, "not sent: approval or access lapsed before anything was sent", "lapse", w.lapse)
		// The evidence of a hold: the lapse, the account and environment
		// the call would have gone to, and that nothing was sent.
		c := ledger.Change{To: ledger.StatusHeld, Kind: ledger.EventKind(w.lapse),
			Detail: map[string]any{"lapse": w.lapse, "account": w.pc.Account, "environment": w.pc.Environment, "sent": false}}
		if w.lapse == ledger.LapseApprovalMismatch {
			c.Flag = ledger.FlagApprovalMismatch
		}
		return w.move(ctx, c)
	}
	w.log.InfoContext(ctx, "not resent: approval or access lapsed while an earlier outcome is unsettled", "lapse", w.lapse)
	return w.move(ctx, ledger.Change{To: ledger.StatusReview, Kind: ledger.EventKind(w.lapse), Review: w.review(ledger.ReasonLapsedUnknown, w.store.Now()),
		Detail: map[string]any{"lapse": w.lapse, "why": "the approval or its token lapsed before the resend, and an earlier attempt may have had the effect"}})
}

// unknown records an outcome that may have happened and schedules how it
// will be settled: a resend with the same key inside the idempotency window,
// else a lookup once "absent" is believable, else a person.
func (w *work) unknown(ctx context.Context, c ledger.Change, now time.Time) error {
	next, how := w.nextForUnknown(now)
	if how == "" {
		// Nothing can confirm or exclude the effect: keep the truth
		// (unknown) in the history, and hand it to a person.
		c.To = ledger.StatusUnknown
		reason, why := w.noWayToSettle(now)
		return w.moveThen(ctx, c, ledger.Change{
			To: ledger.StatusReview, Kind: "needs_review", Review: w.review(reason, now),
			Detail: map[string]any{"why": why},
		})
	}
	// A floor already set (a refusal's Retry-After) is kept.
	if next.After(c.NextAttemptAt) {
		c.NextAttemptAt = next
	}
	if m, ok := c.Detail.(map[string]any); ok {
		m["next_step"] = how
	}
	return w.move(ctx, c)
}

// The ways an unknown outcome is settled without a person.
const (
	stepResend = "resend_same_key"
	stepLookup = "lookup"
)

// nextForUnknown says when and how an unknown outcome is worked on next;
// how is empty when no automatic way exists. The provider's idempotency
// contract comes first: inside its retention a resend with the same key is
// answered with the stored result, and it needs no visibility lag. Past
// retention, after the approval lapsed (nothing may be sent) or with the
// retry budget spent, a lookup is the only way left.
func (w *work) nextForUnknown(now time.Time) (time.Time, string) {
	if w.mayResend(now) {
		return now.Add(backoff(w.pc.Retry, w.op.Attempts)), stepResend
	}
	if w.pc.Lookup != nil {
		at := now
		if w.op.LastSentAt != nil && w.pc.LookupBelievableAt(*w.op.LastSentAt).After(now) {
			at = w.pc.LookupBelievableAt(*w.op.LastSentAt)
		}
		return at, stepLookup
	}
	return time.Time{}, ""
}

// mayResend reports whether the provider's idempotency contract covers a
// resend of the operation with its key now.
func (w *work) mayResend(now time.Time) bool {
	return w.lapse == ledger.LapseNone && w.keyRetained(now) && !w.exhausted(w.op.Attempts, time.Time{}, now)
}

// keyRetained reports whether the provider still knows the operation's key
// for a resend decided at now wherever that resend lands: a request may
// reach the provider, and be worked on, until the call's full timeout
// (plus the margin before it starts) has passed. A resend that lands
// after retention would be a new request to the provider, a second effect
// if the first landed; a lookup settles the outcome instead.
func (w *work) keyRetained(now time.Time) bool {
	return w.op.FirstSentAt != nil && w.pc.IdempotencyValid(*w.op.FirstSentAt, now.Add(w.pc.Timeout.Duration+w.margin))
}

// noWayToSettle says why an unknown outcome goes to a person.
func (w *work) noWayToSettle(now time.Time) (reason ledger.ReviewReason, why string) {
	switch {
	case w.lapse != ledger.LapseNone:
		return ledger.ReasonLapsedUnknown, "the approval or its token lapsed, so nothing may be resent, and the provider has no lookup"
	case w.keyRetained(now):
		return ledger.ReasonRetriesExhausted, "the retry budget is spent and the provider has no lookup"
	default:
		return ledger.ReasonOutcomeUnknown, "the provider has no lookup, and no idempotency key within its retention covers a resend"
	}
}

// settleUnknown works on a claimed operation whose last outcome is unknown.
func (w *work) settleUnknown(ctx context.Context) error {
	now := w.store.Now()
	_, how := w.nextForUnknown(now)
	switch how {
	case stepResend:
		w.log.InfoContext(ctx, "outcome unknown; resending with the same key inside the provider's idempotency window")
		return w.create(ctx)
	case stepLookup:
		return w.lookup(ctx)
	default:
		reason, why := w.noWayToSettle(now)
		return w.move(ctx, ledger.Change{To: ledger.StatusReview, Kind: "needs_review", Review: w.review(reason, now),
			Detail: map[string]any{"why": why}})
	}
}

// lookup asks the provider whether the operation's effect exists, trusting
// the answer only from the account and environment its requests went to.
// The claim is confirmed first, like before a create; the answer is judged
// as of the confirmation (the lookup ran no earlier).
func (w *work) lookup(ctx context.Context) error {
	now := w.store.Now()
	here := ledger.Target{Account: w.pc.Account, Environment: w.pc.Environment}
	foreign, err := w.store.ForeignTargets(ctx, w.op.ID, here)
	if err != nil {
		return err
	}
	if len(foreign) > 0 {
		w.log.WarnContext(ctx, "lookup not trusted: the operation was sent to another account or environment", "sent_to", foreign, "lookup_in", here)
		return w.move(ctx, ledger.Change{To: ledger.StatusReview, Kind: "lookup_untrusted", Review: w.review(ledger.ReasonLookupUntrusted, now),
			Detail: map[string]any{"sent_to": foreign, "lookup_in": here,
				"why": "the provider's account or environment changed since the operation was sent; a lookup here proves nothing about it"}})
	}

	if err := w.takeCall(ctx); err != nil {
		return err
	}
	defer w.releaseCall()
	slot, err := w.startCall(ctx)
	if w.superseded(ctx, err, "lookup") {
		return nil
	}
	if err != nil {
		return err
	}
	now = slot.confirmed
	lr := w.p.Lookup(ctx, w.op.ExternalKey)
	w.releaseCall()
	evidence := lookupEvidence(lr)
	w.log.InfoContext(ctx, "looked up unknown outcome", "result", lr.Status, "http_status", lr.HTTPStatus)
	switch lr.Status {
	case provider.LookupFound:
		return w.move(ctx, ledger.Change{To: ledger.StatusSucceeded, Kind: ledger.EventLookupFound, ProviderReference: lr.ProviderReference, Detail: evidence})
	case provider.LookupAbsent:
		believable := now
		if w.op.LastSentAt != nil {
			believable = w.pc.LookupBelievableAt(*w.op.LastSentAt)
		}
		if now.Before(believable) {
			evidence["believable_at"] = believable
			return w.move(ctx, ledger.Change{To: ledger.StatusUnknown, Kind: ledger.EventLookupAbsentTooEarly, NextAttemptAt: believable, Detail: evidence})
		}
		// Absence is confirmed: nothing happened, so a resend with the
		// same key is safe, if the approval still stands.
		if w.lapse != ledger.LapseNone {
			evidence["lapse"] = w.lapse
			return w.move(ctx, ledger.Change{To: ledger.StatusReview, Kind: ledger.EventLookupAbsentConfirmed, Review: w.review(ledger.ReasonLapsedUnknown, now), Detail: evidence})
		}
		if w.exhausted(w.op.Attempts, time.Time{}, now) {
			return w.move(ctx, ledger.Change{To: ledger.StatusReview, Kind: ledger.EventLookupAbsentConfirmed, Review: w.review(ledger.ReasonRetriesExhausted, now), Detail: evidence})
		}
		if err := w.store.AppendEvent(ctx, w.op.ID, ledger.EventLookupAbsentConfirmed, w.actor, evidence); err != nil {
			return err
		}
		w.log.InfoContext(ctx, "absence confirmed after the visibility lag; resending with the same key")
		return w.create(ctx)
	default:
		if w.exhausted(w.op.RetryBase, time.Time{}, now) {
			return w.move(ctx, ledger.Change{To: ledger.StatusReview, Kind: ledger.EventLookupFailed, Review: w.review(ledger.ReasonLookupFailing, now), Detail: evidence})
		}
		return w.move(ctx, ledger.Change{To: ledger.StatusUnknown, Kind: ledger.EventLookupFailed, NextAttemptAt: now.Add(w.pc.Retry.Max.Duration), Detail: evidence})
	}
}

// move records the claimed operation's next state, conditional on the
// claimed version, and schedules its next dispatch message when the new
// state waits for one. A fenced (stale) worker keeps what it saw as an
// evidence event instead.
func (w *work) move(ctx context.Context, c ledger.Change) error {
	return w.moveThen(ctx, c)
}

// moveThen applies c and then each of more in one transaction (e.g.
// unknown, then review). A worker knows something the ledger does not yet,
// so while Postgres is unreachable it keeps trying until its lease ends;
// after that the sweeper takes over and a lookup finds the truth again.
func (w *work) moveThen(ctx context.Context, c ledger.Change, more ...ledger.Change) error {
	until := time.Until(w.store.Now().Add(5 * time.Second))
	if w.op.LeaseExpiresAt != nil {
		until = w.op.LeaseExpiresAt.Sub(w.store.Now())
	}
	b := retry.WithMaxDuration(max(until, 0), retry.WithCappedDuration(time.Second, retry.NewExponential(100*time.Millisecond)))
	return retry.Do(ctx, b, func(ctx context.Context) error {
		err := w.record(ctx, c, more...)
		if ledger.Unavailable(err) {
			w.log.WarnContext(ctx, "cannot record the result yet; retrying", "operation_id", w.op.ID, "err", err)
			return retry.RetryableError(err)
		}
		return err
	})
}

// record writes c, and then each of more, conditional on the claimed
// version; the ledger adds the dispatch message of a state that waits for
// one.
func (w *work) record(ctx context.Context, c ledger.Change, more ...ledger.Change) error {
	c.ID, c.From, c.Version, c.Actor = w.op.ID, w.op.Status, w.op.Version, w.actor
	for i := range more {
		more[i].Actor = w.actor
	}
	_, err := w.store.Record(ctx, c, more...)
	return w.fenced(ctx, c, err)
}

// fenced turns a stale write (the lease was lost) into what the worker
// saw, kept as evidence; other errors pass through.
func (w *work) fenced(ctx context.Context, c ledger.Change, err error) error {
	if errors.Is(err, ledger.ErrStale) && !w.fencedIsEvidence {
		return nil
	}
	if errors.Is(err, ledger.ErrStale) {
		w.log.WarnContext(ctx, "fenced: the lease was lost before the result was recorded; keeping it as evidence",
			"operation_id", w.op.ID, "would_be", c.To)
		detail := map[string]any{"would_be": c.To, "kind": c.Kind, "evidence": c.Detail, "provider_reference": c.ProviderReference}
		var evidence *ledger.EvidenceMessage
		if c.To == ledger.StatusSucceeded && c.ProviderReference != "" {
			// A success is the truth whoever saw it: the reconciler applies
			// it to whatever state the operation is in now.
			evidence = &ledger.EvidenceMessage{Kind: ledger.EvidenceStaleResult, Provider: w.op.Provider, Reference: w.op.ExternalKey,
				ProviderReference: c.ProviderReference, Worker: w.actor}
		}
		return w.store.KeepStaleResult(ctx, w.op.ID, w.actor, detail, evidence)
	}
	return err
}

func (w *work) review(reason ledger.ReviewReason, now time.Time) *ledger.Review {
	return &ledger.Review{Reason: reason, Owner: w.pc.Review.Owner, Deadline: now.Add(w.pc.Review.Deadline.Duration)}
}

// backoff is the delay before the attempt after attempt (counting from 1):
// exponential from the policy's initial delay, capped, with 10% jitter so
// retries of many operations do not arrive together.
func backoff(p provider.RetryPolicy, attempt int) time.Duration {
	b := retry.WithJitterPercent(10, retry.WithCappedDuration(p.Max.Duration, retry.NewExponential(p.Initial.Duration)))
	var d time.Duration
	for range max(attempt, 1) {
		d, _ = b.Next()
	}
	return d
}

// exhausted reports whether the retry budget is spent after attempts
// attempts: the provider's max_attempts and max_elapsed count from the
// first send, or from an operator's retry, whichever is later.
func (w *work) exhausted(attempts int, sentAt, now time.Time) bool {
	start := sentAt
	if w.op.FirstSentAt != nil {
		start = *w.op.FirstSentAt
	}
	if w.op.RetrySince != nil && w.op.RetrySince.After(start) {
		start = *w.op.RetrySince
	}
	return w.pc.Retry.Exhausted(attempts-w.op.RetryBase, start, now)
}

// deref is the hook p points to, or nil.
func deref[F any](p *F) F {
	var zero F
	if p == nil {
		return zero
	}
	return *p
}

func firstSentPtr(op ledger.Operation, sentAt time.Time) *time.Time {
	if op.FirstSentAt != nil {
		return op.FirstSentAt
	}
	return &sentAt
}

// attemptEvidence is what an attempt event keeps: enough for a person to
// judge it later, never a whole body or a secret.
func attemptEvidence(attempt int, r provider.Result) map[string]any {
	e := map[string]any{
		"attempt": attempt, "class": r.Class, "http_status": r.HTTPStatus, "sent": r.Sent,
		"started_at": r.StartedAt, "ended_at": r.EndedAt, "account": r.Account, "environment": r.Environment,
	}
	if r.Error != "" {
		e["error"] = r.Error
	}
	if r.ProviderReference != "" {
		e["provider_reference"] = r.ProviderReference
	}
	if r.RetryAfter > 0 {
		e["retry_after_seconds"] = r.RetryAfter.Seconds()
	}
	if r.Body != "" {
		e["body"] = r.Body
	}
	return e
}

func lookupEvidence(r provider.LookupResult) map[string]any {
	e := map[string]any{"lookup": r.Status, "http_status": r.HTTPStatus, "at": r.At, "account": r.Account, "environment": r.Environment}
	if r.ProviderReference != "" {
		e["provider_reference"] = r.ProviderReference
	}
	if r.Error != "" {
		e["error"] = r.Error
	}
	if r.Body != "" {
		e["body"] = r.Body
	}
	return e
}
