package dispatcher

import (
	"context"
	"errors"
	"time"

	"github.com/sethvargo/go-retry"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/actledger/actledger/ledger"
	"github.com/actledger/actledger/tracing"
)

// move records the claimed operation's next state c, and then each of
// more, in one transaction (e.g. unknown, then review), conditional on the
// claimed version; the ledger schedules the next dispatch message when the
// new state waits for one. A fenced (stale) worker keeps what it saw as an
// evidence event instead. A worker knows something the ledger does not
// yet, so while Postgres is unreachable it keeps trying until its lease
// ends; after that the sweeper takes over and a lookup finds the truth
// again.
func (w *work) move(ctx context.Context, c ledger.Change, more ...ledger.Change) error {
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
	parent := trace.SpanFromContext(ctx)
	ctx, span := tracing.Start(ctx, w.tracer, "record")
	defer span.End()
	op, err := w.store.Record(ctx, c, more...)
	if span.IsRecording() {
		recordSpan(span, parent, op, c, err)
	}
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

// recordSpan gives a recording span of a result's write the state it left
// the operation in, or the error that kept it from being written.
// The enclosing span (the dispatch) ends in the state recorded last.
func recordSpan(span, parent trace.Span, op ledger.Operation, c ledger.Change, err error) {
	span.SetAttributes(tracing.OperationID.String(c.ID.String()), tracing.State.String(string(c.To)),
		attribute.String("actledger.event", string(c.Kind)))
	if err == nil {
		span.SetAttributes(tracing.State.String(string(op.Status)), tracing.Attempt.Int(op.Attempts))
		parent.SetAttributes(tracing.State.String(string(op.Status)))
		return
	}
	span.SetStatus(codes.Error, err.Error())
}
