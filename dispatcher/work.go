package dispatcher

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/actledger/actledger/ledger"
	"github.com/actledger/actledger/provider"
	"github.com/actledger/actledger/tracing"
)

// errCrashed is returned when the crashAfterCall test hook simulated a
// killed worker.
var errCrashed = errors.New("dispatcher: worker crashed (test hook)")

// work is one claimed operation on its way to its next state.
type work struct {
	store          *ledger.Store
	actor          string
	log            *slog.Logger
	tracer         trace.Tracer
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
	// breakers hears of every create's answer; probe: this claim is its
	// provider's open circuit's probe.
	breakers *breakers
	probe    bool
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
		store: d.store, actor: d.actor(), log: log, tracer: d.tracer, crashAfterCall: deref(d.crashAfterCall.Load()), stallAfterCall: deref(d.stallAfterCall.Load()), onAttempt: d.cfg.OnAttempt,
		op: claimed, pc: pc, p: d.providers[claimed.Provider], lapse: lapse, fencedIsEvidence: true,
		owner: d.cfg.WorkerID, margin: d.cfg.CallMargin, settling: from == ledger.StatusUnknown, fresh: &c.slot,
		calls: d.calls[claimed.Provider], callsDone: callsDone, breakers: d.breakers, probe: c.probe,
	}
	if span := trace.SpanFromContext(ctx); span.IsRecording() {
		span.SetAttributes(tracing.Tenant.String(claimed.Tenant), tracing.Action.String(claimed.Action))
	}
	if from == ledger.StatusUnknown {
		return w.follow(ctx, w.decide(claimedUnknown{}, w.history(), w.store.Now()))
	}
	if lapse != ledger.LapseNone {
		return w.lapsed(ctx)
	}
	return w.create(ctx)
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
	if w.breakers != nil && !w.settling {
		if until, hold := w.breakers.holds(ctx, w.pc, w.probe); hold {
			// Claimed before the circuit opened: not sent, no attempt
			// spent; the probe decides when it goes.
			return w.move(ctx, ledger.Change{To: ledger.StatusRetryWait, Kind: ledger.EventCircuitWait, NextAttemptAt: until,
				Detail: map[string]any{"why": "the provider's circuit is open: new attempts wait for a probe", "sent": false}})
		}
	}
	attempt := w.op.Attempts + 1
	start := time.Now()
	res := w.p.Create(ctx, provider.CreateRequest{ExternalKey: w.op.ExternalKey, Params: w.op.Params})
	if w.crashAfterCall != nil && w.crashAfterCall(w.op) {
		return errCrashed
	}
	w.callReturned(res)
	if w.breakers != nil {
		w.breakers.record(ctx, w.pc, res, w.probe)
	}
	w.log.InfoContext(ctx, "provider answered", "attempt", attempt, "class", res.Class, "http_status", res.HTTPStatus, "error", res.Error)
	if span := trace.SpanFromContext(ctx); span.IsRecording() {
		span.SetAttributes(tracing.Attempt.Int(attempt), tracing.Outcome.String(string(res.Class)))
	}
	r := answered{class: res.Class, retryAfter: res.RetryAfter, reference: res.ProviderReference, review: ledger.ReviewReason(res.Review),
		evidence: attemptEvidence(attempt, res)}
	if res.Sent {
		r.sentFrom, r.sentAt = w.sentWindow(slot, start, res.Class)
	}
	now := w.store.Now()
	h := w.history()
	if needsOutcomeOpen(res.Class, h.settling) {
		if h.outcomeOpen, err = w.store.OutcomeOpen(ctx, w.op.ID); err != nil {
			return err
		}
	}
	return w.follow(ctx, w.decide(r, h, now))
}

// callReturned runs right after a create returns: the call slot is handed
// on and callsDone told at once, before the answer is recorded.
func (w *work) callReturned(res provider.Result) {
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
}

// sentWindow bounds, on the database's clock, when a create sent under
// slot at local instant start may have been at the provider. The request
// may have reached the provider from the moment the claim was confirmed. A
// definite answer ends the request at the provider; without one (a
// timeout, a lost response, a 5xx) the provider may work on it until the
// call's full timeout has passed, whenever the client gave up.
func (w *work) sentWindow(slot callSlot, start time.Time, class provider.Class) (from, at time.Time) {
	from, at = slot.confirmed, slot.dbLatest(time.Now())
	if deadline := slot.dbLatest(start).Add(w.pc.Timeout.Duration); class == provider.ClassUnknown && deadline.After(at) {
		at = deadline
	}
	// A resend answered at once ends before an earlier call whose
	// outcome is unknown may still land: the last send never moves
	// back.
	if w.op.LastSentAt != nil && w.op.LastSentAt.After(at) {
		at = *w.op.LastSentAt
	}
	return from, at
}

// lapsed ends a claim whose approval or token lapsed before a create (see
// policy.lapsed).
func (w *work) lapsed(ctx context.Context) error {
	return w.follow(ctx, w.decide(lapsedUnsent{}, w.history(), w.store.Now()))
}

// history is what decide needs of the ledger beyond the claimed row, as
// far as the claim and its confirmations have read it.
func (w *work) history() history {
	return history{settling: w.settling, lapse: w.lapse}
}

// decide is the policy applied to this work's operation and provider.
func (w *work) decide(r result, h history, now time.Time) decision {
	return decide(w.op, contract{pc: w.pc, margin: w.margin, backoff: backoff}, r, h, now)
}

// follow carries out d: its note, its log line, its changes (conditional
// on the claimed version), then its next step under the same claim.
func (w *work) follow(ctx context.Context, d decision) error {
	if d.note != nil {
		if err := w.store.AppendEvent(ctx, w.op.ID, d.note.kind, w.actor, d.note.detail); err != nil {
			return err
		}
	}
	if d.log != nil {
		w.log.Log(ctx, d.log.level, d.log.msg, d.log.args...)
	}
	if len(d.changes) > 0 {
		return w.move(ctx, d.changes[0], d.changes[1:]...)
	}
	switch d.next {
	case stepResend:
		return w.create(ctx)
	case stepLookup:
		return w.lookup(ctx)
	}
	return nil
}

// deref is the hook p points to, or nil.
func deref[F any](p *F) F {
	var zero F
	if p == nil {
		return zero
	}
	return *p
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
	if r.Reason != "" {
		e["reason"] = r.Reason
	}
	if r.Review != "" {
		e["review"] = r.Review
	}
	if r.RetryAfter > 0 {
		e["retry_after_seconds"] = r.RetryAfter.Seconds()
	}
	if r.Body != "" {
		e["body"] = r.Body
	}
	return e
}
