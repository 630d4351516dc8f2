package reconciler

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"reflect"
	"slices"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/actledger/actledger/broker"
	"github.com/actledger/actledger/internal/startstop"
	"github.com/actledger/actledger/ledger"
	"github.com/actledger/actledger/provider"
	"github.com/actledger/actledger/tracing"
)

// Defaults of Config, applied by New to the zero fields.
const (
	DefaultUnappliedAfter = 30 * time.Second
	DefaultSweepInterval  = 5 * time.Second
)

// Config configures a Reconciler. Zero values mean the documented defaults.
type Config struct {
	// Registry holds the provider contracts. Required.
	Registry *provider.Registry
	// Providers overrides the provider implementation (for lookups) by
	// name; others get a provider.HTTP from their config.
	Providers map[string]provider.Provider
	// UnappliedAfter is how long a stored piece of evidence (a webhook
	// event, a stale result) may stay unapplied before the reconciler
	// applies it from Postgres without its message: JetStream may have
	// lost the message (node loss, MaxAge). It is also the first backoff
	// of a row that could not be applied, doubled per sweep up to
	// sweepMaxBackoff. Default DefaultUnappliedAfter.
	UnappliedAfter time.Duration
	// SweepInterval is how often the reconciler looks for such evidence.
	// Default DefaultSweepInterval.
	SweepInterval time.Duration
	Logger        *slog.Logger
	// TracerProvider makes the span of each application of evidence to an
	// operation with a trace context: it joins the operation's trace,
	// linked to the trace of the webhook's request. Default: otel's global
	// provider.
	TracerProvider trace.TracerProvider
}

// sweepMaxBackoff caps the time between two sweeps of one row.
const sweepMaxBackoff = 5 * time.Minute

// sweepBatch bounds the rows of each kind one sweep applies.
const sweepBatch = 100

// Reconciler applies evidence to the ledger and serves operators.
type Reconciler struct {
	store     *ledger.Store
	broker    *broker.Broker
	cfg       Config
	log       *slog.Logger
	tracer    trace.Tracer
	providers map[string]provider.Provider

	svc startstop.Loop
}

// New returns a reconciler. Start consumes evidence; the operator methods
// work without it.
func New(store *ledger.Store, b *broker.Broker, cfg Config) (*Reconciler, error) {
	cfg = cfg.WithDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	r := &Reconciler{
		store: store, broker: b, cfg: cfg,
		log:       cmp.Or(cfg.Logger, slog.Default()).With("component", "reconciler"),
		tracer:    tracing.Tracer(cfg.TracerProvider),
		providers: make(map[string]provider.Provider),
	}
	for _, pc := range cfg.Registry.Providers() {
		r.providers[pc.Name] = provider.Of(pc, cfg.Providers, provider.HTTPOptions{TracerProvider: cfg.TracerProvider})
	}
	return r, nil
}

// WithDefaults returns cfg with each zero field at its default (the
// Default… constants), as New applies it.
func (cfg Config) WithDefaults() Config {
	cfg.UnappliedAfter = cmp.Or(cfg.UnappliedAfter, DefaultUnappliedAfter)
	cfg.SweepInterval = cmp.Or(cfg.SweepInterval, DefaultSweepInterval)
	return cfg
}

// validate reports the first unusable field of a config with defaults
// applied, by name.
func (cfg Config) validate() error {
	switch {
	case cfg.Registry == nil:
		return errors.New("reconciler: Config.Registry is required")
	case cfg.UnappliedAfter < 0:
		return fmt.Errorf("reconciler: Config.UnappliedAfter %s must not be negative", cfg.UnappliedAfter)
	case cfg.SweepInterval < 0:
		return fmt.Errorf("reconciler: Config.SweepInterval %s must not be negative", cfg.SweepInterval)
	}
	return nil
}

// ConsumerName is the durable consumer every reconciler process shares.
func ConsumerName(prefix string) string { return prefix + "_reconciler" }

// Start consumes the evidence stream, and sweeps evidence whose message
// never came, in the background. It returns at once.
func (r *Reconciler) Start(ctx context.Context) error {
	cons, err := r.broker.JetStream().CreateOrUpdateConsumer(ctx, r.broker.EvidenceStream(), jetstream.ConsumerConfig{
		Durable:       ConsumerName(r.broker.Prefix()),
		Description:   "actledger reconciler: webhook evidence",
		AckPolicy:     jetstream.AckExplicitPolicy,
		AckWait:       30 * time.Second,
		MaxDeliver:    -1,
		DeliverPolicy: jetstream.DeliverAllPolicy,
	})
	if err != nil {
		return fmt.Errorf("reconciler: consumer: %w", err)
	}
	return r.svc.Start(context.WithoutCancel(ctx), func(runCtx context.Context) {
		swept := make(chan struct{})
		go func() {
			defer close(swept)
			r.sweepLoop(runCtx)
		}()
		defer func() { <-swept }()
		cc, err := cons.Consume(func(msg jetstream.Msg) { r.handle(context.WithoutCancel(runCtx), msg) }, jetstream.PullExpiry(broker.PullExpiry))
		if err != nil {
			r.log.ErrorContext(runCtx, "cannot consume evidence", "err", err)
			<-runCtx.Done()
			return
		}
		<-runCtx.Done()
		cc.Drain()
		<-cc.Closed()
	})
}

// Stop stops consuming after the message in hand. Safe to call twice.
func (r *Reconciler) Stop() { r.svc.Stop() }

// handle applies the stored row an evidence message names. The message is
// only a pointer: a message naming no stored row, or a row of another
// provider than its subject's, is terminated and logged, and changes
// nothing.
func (r *Reconciler) handle(ctx context.Context, msg jetstream.Msg) {
	var m ledger.EvidenceMessage
	subjectProvider := r.broker.EvidenceProvider(msg.Subject())
	drop := func(why string, args ...any) {
		r.log.ErrorContext(ctx, "evidence message dropped: "+why,
			append([]any{"subject", msg.Subject(), "kind", m.Kind}, args...)...)
		// Term, not TermWithReason: nats-server 2.9 (the oldest supported)
		// ignores a "+TERM" with a reason, leaving the message pending and
		// redelivered forever. The reason is in the log line above.
		_ = msg.Term()
	}
	if err := json.Unmarshal(msg.Data(), &m); err != nil {
		drop("malformed evidence message", "err", err)
		return
	}
	// The context of the request that delivered the evidence (a
	// webhook's), which the apply span links to.
	ctx = tracing.Context(ctx, msg.Headers().Get(tracing.Header))
	var (
		outcome ledger.EvidenceOutcome
		err     error
	)
	switch {
	case m.Kind == ledger.EvidenceWebhook && m.WebhookEventID > 0:
		ev, gerr := r.store.WebhookEvent(ctx, m.WebhookEventID)
		switch {
		case errors.Is(gerr, ledger.ErrNotFound):
			if berr := r.ledgerBehind(ctx, true, m.WebhookEventID); berr != nil {
				// Not judged: the message comes back, its proof with it.
				err = berr
				break
			}
			drop("no such webhook event", "webhook_event_id", m.WebhookEventID)
			return
		case gerr == nil && ev.Provider != subjectProvider:
			drop("webhook event of another provider than the subject's", "webhook_event_id", m.WebhookEventID, "provider", ev.Provider)
			return
		case gerr != nil:
			err = gerr
		case ev.AppliedAt != nil:
			// Applied already (a redelivery, or the sweep came first).
			outcome = deref(ev.Outcome)
		default:
			outcome, err = r.applyWebhook(ctx, ev)
		}
	case m.Kind == ledger.EvidenceStaleResult && m.StaleResultID > 0:
		sr, gerr := r.store.StaleResult(ctx, m.StaleResultID)
		switch {
		case errors.Is(gerr, ledger.ErrNotFound):
			if berr := r.ledgerBehind(ctx, false, m.StaleResultID); berr != nil {
				// Not judged: the message comes back, its proof with it.
				err = berr
				break
			}
			drop("no such stale result", "stale_result_id", m.StaleResultID)
			return
		case gerr == nil && sr.Provider != subjectProvider:
			drop("stale result of another provider than the subject's", "stale_result_id", m.StaleResultID, "provider", sr.Provider)
			return
		case gerr != nil:
			err = gerr
		case sr.AppliedAt != nil:
			outcome = deref(sr.Outcome)
		default:
			outcome, err = r.applyStaleResult(ctx, sr)
		}
	default:
		drop("evidence message names no stored row")
		return
	}
	if err != nil {
		r.log.WarnContext(ctx, "evidence not applied yet; will retry", "subject", msg.Subject(), "kind", m.Kind,
			"webhook_event_id", m.WebhookEventID, "stale_result_id", m.StaleResultID, "err", err)
		_ = msg.NakWithDelay(2 * time.Second)
		return
	}
	r.log.DebugContext(ctx, "evidence message handled", "kind", m.Kind, "outcome", outcome)
	_ = msg.Ack()
}

// ledgerBehind deals with an evidence message naming a stored row the
// ledger does not hold: when its id is beyond any the table has handed
// out, the ledger lost the row (a failover to an asynchronous replica, a
// restore) and dispatch is paused for every tenant, reason ledger_behind;
// otherwise the row was pruned (or the message lies) and it is only
// dropped.
func (r *Reconciler) ledgerBehind(ctx context.Context, webhook bool, id int64) error {
	beyond, err := r.store.EvidenceBeyond(ctx, webhook, id)
	if err != nil {
		return fmt.Errorf("ask whether the ledger lost evidence row %d: %w", id, err)
	}
	if !beyond {
		return nil
	}
	b := ledger.Behind{Kind: "stale result", EvidenceID: id}
	if webhook {
		b.Kind = "webhook event"
	}
	paused, err := r.store.LedgerBehind(ctx, b)
	if errors.Is(err, ledger.ErrBehindNotProven) {
		return fmt.Errorf("evidence row %d seemed lost, but the ledger's sequence has reached it: %w", id, err)
	}
	if err != nil {
		r.log.ErrorContext(ctx, "the ledger is behind its messages: committed work was lost (a failover or a restore), and dispatch could not be paused",
			"kind", b.Kind, "evidence_id", id, "err", err)
		return err
	}
	r.log.ErrorContext(ctx, "the ledger is behind its messages: committed work was lost (a failover or a restore); dispatch is paused for every tenant",
		"kind", b.Kind, "evidence_id", id, "tenants_paused", paused)
	return nil
}

// applyWebhook applies a stored webhook event and marks it applied.
func (r *Reconciler) applyWebhook(ctx context.Context, ev ledger.WebhookEvent) (ledger.EvidenceOutcome, error) {
	var data json.RawMessage
	if pc, ok := r.cfg.Registry.Provider(ev.Provider); ok && !pc.HasWebhookExpressions() {
		// v1's body carries the effect's fields under "data", in the
		// params' own names; a supplier's own body (a webhook block) has
		// its own shape, which cannot be held against the params.
		data = webhookData(ev.Payload)
	}
	outcome, err := r.Apply(ctx, Evidence{
		Source: "webhook:" + ev.EventID, Provider: ev.Provider, Reference: ev.Reference,
		ProviderReference: ev.ProviderReference, Status: ev.Status, Final: true, Data: data,
	})
	if err != nil {
		return "", err
	}
	return outcome, r.store.MarkWebhookApplied(ctx, ev.ID, outcome)
}

// applyStaleResult applies a success that a worker saw after it lost its
// lease (by then the operation may be unknown, in review, or settled) and
// marks it applied.
func (r *Reconciler) applyStaleResult(ctx context.Context, sr ledger.StaleResult) (ledger.EvidenceOutcome, error) {
	outcome, err := r.Apply(ctx, Evidence{
		Source: "stale_result:" + sr.Worker, Provider: sr.Provider, Reference: sr.Reference,
		ProviderReference: sr.ProviderReference, Status: ledger.EvidenceSucceeded, Final: true,
	})
	if err != nil {
		return "", err
	}
	return outcome, r.store.MarkStaleResultApplied(ctx, sr.ID, outcome)
}

// sweepLoop runs Sweep every SweepInterval until ctx ends.
func (r *Reconciler) sweepLoop(ctx context.Context) {
	startstop.Every(ctx, r.cfg.SweepInterval, r.Sweep, func(ctx context.Context, err error) {
		r.log.WarnContext(ctx, "evidence sweep failed; the next one will retry", "err", err)
	})
}

// Sweep applies, from Postgres, the stored evidence that is still
// unapplied UnappliedAfter after it was stored: its message was lost (or
// is far behind; applying evidence twice changes nothing the second time).
// Each row swept is not looked at again before its backoff, so a row that
// cannot be applied yet is not retried every interval.
func (r *Reconciler) Sweep(ctx context.Context) error {
	policy := ledger.SweepPolicy{After: r.cfg.UnappliedAfter, MaxBackoff: sweepMaxBackoff, Limit: sweepBatch}
	events, err := r.store.SweepWebhookEvents(ctx, policy)
	if err != nil {
		return err
	}
	for _, ev := range events {
		outcome, err := r.applyWebhook(ctx, ev)
		if err != nil {
			r.log.WarnContext(ctx, "swept webhook event not applied; it is looked at again after its backoff",
				"webhook_event_id", ev.ID, "provider", ev.Provider, "err", err)
			continue
		}
		r.log.WarnContext(ctx, "webhook event applied from Postgres: its evidence message never arrived",
			"webhook_event_id", ev.ID, "provider", ev.Provider, "outcome", outcome)
	}
	results, err := r.store.SweepStaleResults(ctx, policy)
	if err != nil {
		return err
	}
	for _, sr := range results {
		outcome, err := r.applyStaleResult(ctx, sr)
		if err != nil {
			r.log.WarnContext(ctx, "swept stale result not applied; it is looked at again after its backoff",
				"stale_result_id", sr.ID, "operation_id", sr.OperationID, "err", err)
			continue
		}
		r.log.WarnContext(ctx, "stale result applied from Postgres: its evidence message never arrived",
			"stale_result_id", sr.ID, "operation_id", sr.OperationID, "outcome", outcome)
	}
	return nil
}

// webhookData returns the "data" object of a webhook body, if any.
func webhookData(payload json.RawMessage) json.RawMessage {
	var body struct {
		Data json.RawMessage `json:"data"`
	}
	_ = json.Unmarshal(payload, &body)
	return body.Data
}

// Evidence is one observation from outside about an operation's effect.
type Evidence struct {
	// Source names it in the operation's history: "webhook:<event id>",
	// "lookup", "replay:lookup".
	Source   string
	Provider string
	// Reference is the external key the dispatcher sent.
	Reference         string
	ProviderReference string
	Status            ledger.EvidenceStatus
	// Final: a failure that the provider may still turn into a success is
	// not final and settles nothing.
	Final bool
	// Data is what the provider says about the effect (amounts,
	// quantities), compared with the approved params.
	Data json.RawMessage
	// Agrees, when set, is the judgement of the effect against the
	// approved params made by its source (a statement record's
	// reconcile.match), in place of comparing Data: false sends the
	// operation to review effect_mismatch.
	Agrees *bool
	// Kind is the event the evidence becomes in the operation's history:
	// ledger.EventEvidence when empty, ledger.EventReconciled for a
	// statement's record.
	Kind ledger.EventKind
}

// Apply applies ev to the ledger. Each applied piece of evidence becomes an
// event naming its source. It retries when the operation changes under it.
func (r *Reconciler) Apply(ctx context.Context, ev Evidence) (ledger.EvidenceOutcome, error) {
	for range 5 {
		outcome, err := r.applyOnce(ctx, ev)
		if !errors.Is(err, ledger.ErrStale) {
			if err == nil {
				r.log.InfoContext(ctx, "evidence applied", "source", ev.Source, "provider", ev.Provider,
					"reference", ev.Reference, "status", ev.Status, "outcome", outcome)
			}
			return outcome, err
		}
	}
	return "", fmt.Errorf("reconciler: operation %s kept changing while applying %s", ev.Reference, ev.Source)
}

func (r *Reconciler) applyOnce(ctx context.Context, ev Evidence) (ledger.EvidenceOutcome, error) {
	op, err := r.store.GetByExternalKey(ctx, ev.Reference)
	if errors.Is(err, ledger.ErrNotFound) || (err == nil && op.Provider != ev.Provider) {
		return r.unmatched(ctx, ev)
	}
	if err != nil {
		return "", err
	}
	ctx, span := r.applySpan(ctx, op, ev)
	outcome, err := r.applyTo(ctx, ev, op)
	if span.IsRecording() {
		span.SetAttributes(attribute.String("actledger.evidence.outcome", string(outcome)))
		if err != nil && !errors.Is(err, ledger.ErrStale) {
			span.SetStatus(codes.Error, err.Error())
		}
	}
	span.End()
	return outcome, err
}

// applySpan starts the span of applying ev to op: a child of the context
// op was requested in, linked to the context ctx holds (the request that
// delivered the evidence), or a child of that context when op has none.
// Neither: no span (tracing.Start).
func (r *Reconciler) applySpan(ctx context.Context, op ledger.Operation, ev Evidence) (context.Context, trace.Span) {
	var opts []trace.SpanStartOption
	if op.Traceparent != nil {
		if delivered := trace.SpanContextFromContext(ctx); delivered.IsValid() {
			opts = append(opts, trace.WithLinks(trace.Link{SpanContext: delivered}))
		}
		ctx = tracing.Context(ctx, *op.Traceparent)
	}
	if !trace.SpanContextFromContext(ctx).IsValid() {
		return ctx, trace.SpanFromContext(ctx)
	}
	source, _, _ := strings.Cut(ev.Source, ":")
	opts = append(opts, trace.WithAttributes(tracing.OperationID.String(op.ID.String()), tracing.Tenant.String(op.Tenant),
		tracing.Action.String(op.Action), tracing.Provider.String(op.Provider), tracing.State.String(string(op.Status)),
		attribute.String("actledger.evidence.source", source), attribute.String("actledger.evidence.status", string(ev.Status))))
	return r.tracer.Start(ctx, "apply evidence", opts...)
}

// applyTo applies ev to op, the operation it names, as read.
func (r *Reconciler) applyTo(ctx context.Context, ev Evidence, op ledger.Operation) (ledger.EvidenceOutcome, error) {
	pc, ok := r.cfg.Registry.Provider(op.Provider)
	if !ok {
		return "", fmt.Errorf("reconciler: provider %s of operation %s is not configured", op.Provider, op.ID)
	}
	detail := map[string]any{"source": ev.Source, "status": ev.Status, "provider_reference": ev.ProviderReference}
	if len(ev.Data) > 0 && len(ev.Data) <= 4096 {
		detail["data"] = ev.Data
	}
	kind := cmp.Or(ev.Kind, ledger.EventEvidence)
	change := ledger.Change{ID: op.ID, From: op.Status, Version: op.Version, Kind: kind, Actor: "reconciler:" + ev.Source, Detail: detail}
	review := func(reason ledger.ReviewReason) (ledger.EvidenceOutcome, error) {
		change.To = ledger.StatusReview
		change.Review = &ledger.Review{Reason: reason, Owner: pc.Review.Owner, Deadline: r.store.Now().Add(pc.Review.Deadline.Duration)}
		if op.Status == ledger.StatusReview && op.ReviewReason != nil && *op.ReviewReason == reason {
			return ledger.OutcomeNoChange, r.store.AppendEvent(ctx, op.ID, kind, change.Actor, detail)
		}
		if !op.Status.CanMoveTo(ledger.StatusReview) {
			return ledger.OutcomeRecorded, r.store.AppendEvent(ctx, op.ID, kind, change.Actor, detail)
		}
		_, err := r.store.Transition(ctx, change)
		return ledger.OutcomeReview, err
	}
	record := func() (ledger.EvidenceOutcome, error) {
		return ledger.OutcomeRecorded, r.store.AppendEvent(ctx, op.ID, kind, change.Actor, detail)
	}

	if ev.Status == ledger.EvidenceSucceeded {
		if ev.Agrees != nil && !*ev.Agrees {
			detail["mismatched"] = "reconcile.match"
			return review(ledger.ReasonEffectMismatch)
		}
		if diff := mismatch(op.Params, ev.Data, pc.ReferenceParam); ev.Agrees == nil && len(diff) > 0 {
			detail["mismatched"] = diff
			return review(ledger.ReasonEvidenceMismatch)
		}
		switch {
		case op.Status == ledger.StatusCancelled, contested(op):
			return record()
		case op.ProviderReference != nil || op.Status == ledger.StatusSucceeded:
			// An effect is confirmed already (succeeded, or in review
			// because of it, e.g. a duplicate): the same reference again
			// changes nothing, another one is a second effect.
			if op.ProviderReference == nil || *op.ProviderReference == ev.ProviderReference {
				return ledger.OutcomeNoChange, nil
			}
			detail["recorded_reference"] = *op.ProviderReference
			return review(ledger.ReasonDuplicateEffect)
		case op.Status == ledger.StatusFailed:
			return review(ledger.ReasonConflictingEvidence)
		case !op.Status.CanMoveTo(ledger.StatusSucceeded):
			// Never sent (a proposal still awaiting its decision): the
			// success cannot settle it, and retrying the move would keep
			// the evidence unapplied for ever. It is kept in the history.
			return record()
		}
		lapse, err := r.store.CheckLapse(ctx, op.ID)
		if err != nil {
			return "", err
		}
		if lapse != ledger.LapseNone {
			change.Flag = ledger.FlagLateSuccess
			detail["lapse"] = lapse
		}
		change.To, change.ProviderReference = ledger.StatusSucceeded, ev.ProviderReference
		_, err = r.store.Transition(ctx, change)
		return ledger.OutcomeSettledSucceeded, err
	}

	// A failure settles only what never confirmed an outcome, and only
	// when the provider says it is final.
	if !ev.Final || contested(op) {
		return record()
	}
	switch op.Status {
	case ledger.StatusSucceeded:
		return review(ledger.ReasonConflictingEvidence)
	case ledger.StatusReview, ledger.StatusUnknown, ledger.StatusDispatching:
		if op.ProviderReference != nil || reviewedFor(op, ledger.ReasonReferenceMissing) {
			// An effect was confirmed: a failure contradicts it.
			return review(ledger.ReasonConflictingEvidence)
		}
		change.To = ledger.StatusFailed
		change.CompensationReview = &ledger.Review{Reason: ledger.ReasonCompensationFailed, Owner: pc.Review.Owner, Deadline: r.store.Now().Add(pc.Review.Deadline.Duration)}
		_, err := r.store.Transition(ctx, change)
		return ledger.OutcomeSettledFailed, err
	case ledger.StatusFailed:
		return ledger.OutcomeNoChange, nil
	default:
		return record()
	}
}

// reviewedFor reports whether op is in review for reason.
func reviewedFor(op ledger.Operation, reason ledger.ReviewReason) bool {
	return op.Status == ledger.StatusReview && op.ReviewReason != nil && *op.ReviewReason == reason
}

// contested reports whether op is in review because pieces of evidence
// disagree (a second effect, amounts that differ, success against
// failure). More evidence is kept for the person deciding, but settles
// nothing: only reviews of an unknown outcome are settled by evidence.
func contested(op ledger.Operation) bool {
	if op.Status != ledger.StatusReview || op.ReviewReason == nil {
		return false
	}
	switch *op.ReviewReason {
	case ledger.ReasonDuplicateEffect, ledger.ReasonEvidenceMismatch, ledger.ReasonConflictingEvidence,
		ledger.ReasonEffectMismatch, ledger.ReasonEffectMissing:
		return true
	}
	return false
}

// unmatched records evidence no operation explains as a review item of the
// provider's tenant. A provider without a tenant (one that sends no
// webhooks; the config requires a tenant of those that do) gets an item
// no tenant sees: unmatched evidence never crosses tenants.
func (r *Reconciler) unmatched(ctx context.Context, ev Evidence) (ledger.EvidenceOutcome, error) {
	pc, ok := r.cfg.Registry.Provider(ev.Provider)
	if !ok {
		return "", fmt.Errorf("reconciler: evidence from unconfigured provider %s", ev.Provider)
	}
	u := ledger.Unmatched{
		Provider: ev.Provider, Source: ev.Source, Reference: ev.Reference, Status: ev.Status,
		Owner: pc.Review.Owner, Deadline: r.store.Now().Add(pc.Review.Deadline.Duration),
	}
	if ev.ProviderReference != "" {
		u.ProviderReference = &ev.ProviderReference
	}
	if len(ev.Data) > 0 && len(ev.Data) <= 4096 && json.Valid(ev.Data) {
		u.Detail = ev.Data
	}
	tenant := ""
	if pc.Tenant != "" {
		id, err := r.store.EnsureTenant(ctx, pc.Tenant)
		if err != nil {
			return "", fmt.Errorf("reconciler: tenant %s of provider %s: %w", pc.Tenant, pc.Name, err)
		}
		u.TenantID, tenant = &id, pc.Tenant
	}
	r.log.WarnContext(ctx, "evidence matches no operation; opened a review item", "provider", ev.Provider,
		"tenant", tenant, "reference", ev.Reference, "source", ev.Source)
	_, err := r.store.RecordUnmatched(ctx, u, tenant)
	return ledger.OutcomeUnmatched, err
}

// mismatch lists the params whose values the provider's data reports
// differently (amounts, quantities): keys present in both, compared as
// JSON values. The data may hold the params under "params".
func mismatch(params, data json.RawMessage, referenceParam string) []string {
	if len(data) == 0 {
		return nil
	}
	var approved, reported map[string]any
	if decodeNumbers(params, &approved) != nil || decodeNumbers(data, &reported) != nil {
		return nil
	}
	if nested, ok := reported["params"].(map[string]any); ok {
		reported = nested
	}
	var diff []string
	for _, k := range slices.Sorted(maps.Keys(approved)) {
		got, ok := reported[k]
		if !ok || k == referenceParam {
			continue
		}
		if !reflect.DeepEqual(normalise(approved[k]), normalise(got)) {
			diff = append(diff, k)
		}
	}
	return diff
}

func decodeNumbers(raw json.RawMessage, v any) error {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	return dec.Decode(v)
}

// normalise makes 3, 3.0 and 3e0 equal.
func normalise(v any) any {
	switch x := v.(type) {
	case json.Number:
		if f, err := x.Float64(); err == nil {
			return f
		}
		return x.String()
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			out[k] = normalise(e)
		}
		return out
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = normalise(e)
		}
		return out
	}
	return v
}
