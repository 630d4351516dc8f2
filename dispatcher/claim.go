package dispatcher

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/actledger/actledger/ledger"
	"github.com/actledger/actledger/provider"
	"github.com/actledger/actledger/tracing"
)

// errNoTimeToCall is returned when the worker could not confirm its claim
// quickly enough for a call to fit in the lease it got: nothing is called,
// and the lease runs out into the sweeper's hands.
var errNoTimeToCall = errors.New("dispatcher: could not confirm the claim in time for a call to fit in the lease")

// execute does what the ledger says the operation of dispatch message m
// (from providerName's consumer) needs now: a first or retried create
// (queued, retry_wait), or settling an unknown outcome (unknown). Anything
// else, or an operation claimed by another worker, or paused, is left
// alone. It returns an error only when the ledger could not be read or
// written. callsDone, when set, is told once the operation will call its
// provider no more in this run (see work.callsDone).
func (d *Dispatcher) execute(ctx context.Context, providerName string, m ledger.Dispatch, callsDone func()) error {
	pc, ok := d.configs[providerName]
	if !ok {
		return fmt.Errorf("dispatch message from provider %q, which is not configured", providerName)
	}
	if m.Version == 1 {
		probe, err := d.breakers.gate(ctx, pc)
		if err != nil {
			return err
		}
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
			c.probe = probe
			return d.run(ctx, c, ledger.StatusQueued, callsDone)
		}
		if !errors.Is(err, ledger.ErrStale) {
			return err
		}
		// It moved on, its dispatch is paused, or it is another
		// provider's: read what it needs now.
	}
	op, err := d.store.GetInternal(ctx, m.OperationID)
	if errors.Is(err, ledger.ErrNotFound) {
		// Only this read's miss is the message naming an operation the
		// ledger does not hold; a row missing elsewhere is another error.
		return behindError{Kind: "dispatch", OperationID: m.OperationID, Version: m.Version}
	}
	if err != nil {
		return err
	}
	if m.Version > op.Version {
		// Versions only grow, and a message is written with the change
		// that made its version: this one's change is lost.
		return behindError{Kind: "dispatch", OperationID: op.ID, Version: m.Version, Known: true, At: op.Version}
	}
	if !op.Status.AwaitsDispatch() {
		return nil
	}
	if ledger.DispatchDue(op.Status, op.NextAttemptAt).After(d.store.Now().Add(50 * time.Millisecond)) {
		// Early (a duplicate or a sweep): the scheduled message will come.
		return nil
	}
	if op.Provider != pc.Name {
		// Not this consumer's to send: if the operation still waits, the
		// sweeper re-publishes it on its own provider's subject.
		d.log.ErrorContext(ctx, "dispatch message on another provider's subject dropped",
			"operation_id", op.ID, "provider", op.Provider, "subject_provider", pc.Name)
		return nil
	}
	// A new attempt waits while the provider's circuit is open; settling
	// an unknown outcome does not.
	var probe bool
	if op.Status != ledger.StatusUnknown {
		if probe, err = d.breakers.gate(ctx, pc); err != nil {
			return err
		}
	}
	c, err := d.claim(ctx, pc, op.ID, op.Status, op.Version)
	c.probe = probe
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
	// probe: the claim is its provider's open circuit's one probe.
	probe bool
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
	ctx, span := tracing.Start(ctx, d.tracer, "claim")
	defer span.End()
	asked := time.Now()
	op, lapse, err := d.store.Claim(ctx, ledger.Change{
		ID: id, From: from, Version: version, To: ledger.StatusDispatching,
		Kind: ledger.EventClaimed, Actor: d.actor(), UnlessPaused: true, Provider: pc.Name,
		LeaseOwner: d.cfg.WorkerID, LeaseFor: d.cfg.LeaseDuration,
		Detail: map[string]any{"lease_seconds": d.cfg.LeaseDuration.Seconds(), "account": pc.Account, "environment": pc.Environment},
	}, targetOf(pc))
	if span.IsRecording() {
		claimSpan(span, op, lapse, err)
	}
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

// targetOf is where pc's calls create effects: an approval granted for
// another account or environment does not let the worker call, and a
// lookup is trusted only where the operation was sent.
func targetOf(pc *provider.Config) ledger.Target {
	return ledger.Target{Account: pc.Account, Environment: pc.Environment}
}

func (d *Dispatcher) actor() string { return "worker:" + d.cfg.WorkerID }

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

// claimSpan gives a recording claim span its outcome: the operation it
// took and the state it left it in, or why not (stale: another worker has
// it, it moved on, or its dispatch is paused).
func claimSpan(span trace.Span, op ledger.Operation, lapse ledger.Lapse, err error) {
	if err != nil {
		span.SetAttributes(attribute.Bool("actledger.claimed", false))
		if !errors.Is(err, ledger.ErrStale) {
			span.SetStatus(codes.Error, err.Error())
		}
		return
	}
	span.SetAttributes(attribute.Bool("actledger.claimed", true), tracing.OperationID.String(op.ID.String()),
		tracing.Tenant.String(op.Tenant), tracing.Action.String(op.Action), tracing.Provider.String(op.Provider),
		tracing.State.String(string(op.Status)))
	if lapse != ledger.LapseNone {
		span.SetAttributes(attribute.String("actledger.lapse", string(lapse)))
	}
}
