package dispatcher

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	"github.com/nats-io/nats.go/jetstream"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/actledger/actledger/broker"
	"github.com/actledger/actledger/internal/startstop"
	"github.com/actledger/actledger/internal/testsignal"
	"github.com/actledger/actledger/ledger"
	"github.com/actledger/actledger/provider"
	"github.com/actledger/actledger/tracing"
)

// Defaults of Config, applied by New to the zero fields.
const (
	DefaultConcurrency = 16
	// ClaimsAhead is how many operations per call slot a worker pool may
	// hold between a dispatch message's arrival and the end of its create
	// call: claims waiting for their shared commit, claimed operations
	// waiting for a call slot, calls. Without room ahead, every slot
	// waited out a claim's commit before its call, and at the end-to-end
	// maximum the messages queued for slots; with room for 4 they no
	// longer did, and 2 measured the same within noise. An answer waiting
	// for its shared commit holds no room: the consumer's MaxAckPending
	// (8 per slot) bounds those. While it did, messages queued for room
	// on a slower machine. The figures: docs/benchmarks.md, "What changed,
	// and what each change bought", the rows on dispatcher.ClaimsAhead.
	//
	// 2, not more, so that no lease can run out while its operation waits
	// for a slot: at most one operation per slot waits, slots are handed
	// on in arrival order, and a call ends within its timeout, so a
	// claimed operation waits at most one timeout, which is shorter than
	// the lease (Config.LeaseDuration); the confirmation before its call
	// then extends the lease. With more room, a provider whose calls all
	// time out would see claims expire unsent and go to unknown. It also
	// stays below the consumer's MaxAckPending (8 per slot).
	ClaimsAhead          = 2
	DefaultLeaseDuration = 30 * time.Second
	// DefaultMaxCallMargin caps the default CallMargin, which is otherwise
	// a tenth of LeaseDuration.
	DefaultMaxCallMargin = time.Second
)

// Config configures a Dispatcher. Zero values mean the documented defaults.
type Config struct {
	// Registry holds the provider contracts. Required.
	Registry *provider.Registry
	// Providers overrides the provider implementation by name; providers
	// not in it get a provider.HTTP built from their config.
	Providers map[string]provider.Provider
	// Concurrency is how many calls (creates and lookups) this process
	// makes to one provider at once; each provider has its own workers and
	// its own consumer, so a slow provider does not block the others. A
	// call slot is held only for the call itself: up to ClaimsAhead times
	// as many operations are being claimed or called, and answers are
	// recorded beside them, so neither a claim's commit nor a result's
	// idles a slot, and the provider never sees more than Concurrency
	// calls from this process.
	// Default DefaultConcurrency.
	Concurrency int
	// LeaseDuration is how long a claim lasts; a worker that has not
	// recorded its result by then is fenced. It must exceed every
	// provider's timeout plus CallMargin, so that a call can fit in a
	// fresh lease. Default DefaultLeaseDuration.
	LeaseDuration time.Duration
	// CallMargin is what a call's full timeout must leave of the lease,
	// on the database's clock, before the call may start: time to send
	// the request after the claim was confirmed and to record the answer.
	// Right before every call the worker extends its lease to cover it
	// (see work.confirm). Default min(DefaultMaxCallMargin,
	// LeaseDuration/10).
	CallMargin time.Duration
	// WorkerID names this process in leases and events. Default
	// "<hostname>-<pid>-<random>".
	WorkerID string
	// OnAttempt, when set, is told of every provider attempt's class (for
	// metrics).
	OnAttempt func(provider string, class provider.Class)
	Logger    *slog.Logger
	// TracerProvider makes the spans of a dispatch message that carries a
	// trace context (its traceparent header): the dispatch, its claim,
	// each provider call (whose request carries the context on to the
	// supplier) and the recording of the result. Default: otel's global
	// provider.
	TracerProvider trace.TracerProvider
}

// Dispatcher runs the dispatch workers of one process.
type Dispatcher struct {
	store     *ledger.Store
	broker    *broker.Broker
	cfg       Config
	log       *slog.Logger
	tracer    trace.Tracer
	providers map[string]provider.Provider

	// crashAfterCall, set by tests, makes a worker stop dead right after
	// the provider call, as a killed process would: nothing recorded,
	// nothing acknowledged.
	crashAfterCall atomic.Pointer[func(ledger.Operation) bool]
	// stallAfterCall, set by tests, holds a worker between the provider
	// call and recording its answer, as a stalled process would.
	stallAfterCall atomic.Pointer[func(ledger.Operation)]
	// afterClaim, set by tests, holds a worker between its claim's
	// statement and its use of the claim, as a slow shared commit, a
	// network delay or a paused process would. The test hooks are atomic:
	// tests set them while workers run.
	afterClaim atomic.Pointer[func(ledger.Operation)]

	// configs are the provider contracts with the timeouts calls really
	// get (see provider.Config.DispatchTimeout).
	configs map[string]*provider.Config

	// breakers is the view of the providers' circuits.
	breakers *breakers

	// calls holds each provider's call slots (Concurrency of them): a
	// worker takes one right before a create or a lookup and hands it on
	// when the call returns.
	calls map[string]chan struct{}

	svc      startstop.Loop
	handlers sync.WaitGroup

	// TestSignals are armed by tests (TestSignals.Init) before Start;
	// unarmed, as in production, they do nothing.
	TestSignals TestSignals
}

// TestSignals are the moments of a running dispatcher a test waits for:
// the changes of a provider's circuit this process makes. A circuit's
// value is as the ledger holds it right after the change.
type TestSignals struct {
	// CircuitOpened: this process's failure opened the circuit.
	CircuitOpened testsignal.Signal[ledger.Circuit]
	// ProbeSent: a claim of this process is the open circuit's probe; the
	// circuit as read before the probe was taken.
	ProbeSent testsignal.Signal[ledger.Circuit]
	// ProbeFailed: the probe got no answer; the circuit stays open, with
	// its cooldown doubled.
	ProbeFailed testsignal.Signal[ledger.Circuit]
	// CircuitClosed: the probe was answered, and the circuit of the
	// provider named is closed.
	CircuitClosed testsignal.Signal[string]
}

// Init arms every signal for tb.
func (ts *TestSignals) Init(tb testsignal.TB) {
	ts.CircuitOpened.Init(tb)
	ts.ProbeSent.Init(tb)
	ts.ProbeFailed.Init(tb)
	ts.CircuitClosed.Init(tb)
}

// New returns a dispatcher; Start runs it.
func New(store *ledger.Store, b *broker.Broker, cfg Config) (*Dispatcher, error) {
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	d := &Dispatcher{
		store: store, broker: b, cfg: cfg,
		log:       cmp.Or(cfg.Logger, slog.Default()).With("component", "dispatcher", "worker", cfg.WorkerID),
		tracer:    tracing.Tracer(cfg.TracerProvider),
		providers: make(map[string]provider.Provider),
		configs:   make(map[string]*provider.Config),
		calls:     make(map[string]chan struct{}),
	}
	d.breakers = newBreakers(store, d.log, &d.TestSignals)
	for _, pc := range cfg.Registry.Providers() {
		// A call must end within its lease: an explicit timeout that does
		// not is refused, a default one is min(10s, lease/2). The worker
		// starts a call only when its full timeout plus the margin fits
		// before the lease ends (extending the lease if needed), so a
		// lease too short for that could never make a call.
		timeout, err := pc.DispatchTimeout(cfg.LeaseDuration)
		if err != nil {
			return nil, fmt.Errorf("dispatcher: %w", err)
		}
		if timeout+cfg.CallMargin >= cfg.LeaseDuration {
			return nil, fmt.Errorf("dispatcher: provider %q: timeout %s plus the call margin %s must be shorter than LEASE_DURATION %s; lower the timeout or raise LEASE_DURATION",
				pc.Name, timeout, cfg.CallMargin, cfg.LeaseDuration)
		}
		if timeout != pc.Timeout.Duration {
			fitted := *pc // the registry's config is shared: change a copy
			fitted.Timeout = provider.Duration{Duration: timeout}
			pc = &fitted
		}
		d.configs[pc.Name] = pc
		d.calls[pc.Name] = make(chan struct{}, cfg.Concurrency)
		d.providers[pc.Name] = provider.Of(pc, cfg.Providers, provider.HTTPOptions{TracerProvider: cfg.TracerProvider})
	}
	return d, nil
}

// withDefaults fills the zero fields with the defaults.
func (cfg Config) withDefaults() Config {
	cfg.Concurrency = cmp.Or(cfg.Concurrency, DefaultConcurrency)
	cfg.LeaseDuration = cmp.Or(cfg.LeaseDuration, DefaultLeaseDuration)
	cfg.CallMargin = cmp.Or(cfg.CallMargin, min(DefaultMaxCallMargin, cfg.LeaseDuration/10))
	if cfg.WorkerID == "" {
		host, _ := os.Hostname()
		cfg.WorkerID = fmt.Sprintf("%s-%d-%s", cmp.Or(host, "worker"), os.Getpid(), uuid.NewString()[:8])
	}
	return cfg
}

// validate reports the first unusable field of a config with defaults
// applied, by name.
func (cfg Config) validate() error {
	switch {
	case cfg.Registry == nil:
		return errors.New("dispatcher: Config.Registry is required")
	case cfg.Concurrency <= 0:
		return fmt.Errorf("dispatcher: Config.Concurrency %d must be positive", cfg.Concurrency)
	case cfg.LeaseDuration <= 0:
		return fmt.Errorf("dispatcher: Config.LeaseDuration %s must be positive", cfg.LeaseDuration)
	case cfg.CallMargin <= 0:
		return fmt.Errorf("dispatcher: Config.CallMargin %s must be positive", cfg.CallMargin)
	}
	return nil
}

// ConsumerName is the durable consumer all dispatcher processes share for
// provider.
func ConsumerName(prefix, providerName string) string {
	return prefix + "_dispatch_" + providerName
}

// Start creates (or updates) each provider's durable consumer and starts
// its workers. It returns at once.
func (d *Dispatcher) Start(ctx context.Context) error {
	var consumers []jetstream.Consumer
	for _, pc := range d.cfg.Registry.Providers() {
		cons, err := d.broker.JetStream().CreateOrUpdateConsumer(ctx, d.broker.OpsStream(), jetstream.ConsumerConfig{
			Durable:       ConsumerName(d.broker.Prefix(), pc.Name),
			Description:   "actledger dispatch workers for provider " + pc.Name,
			FilterSubject: d.broker.DispatchSubject(pc.Name),
			AckPolicy:     jetstream.AckExplicitPolicy,
			AckWait:       d.cfg.LeaseDuration + pc.Timeout.Duration,
			MaxDeliver:    -1,
			MaxAckPending: d.cfg.Concurrency * 8,
			DeliverPolicy: jetstream.DeliverAllPolicy,
		})
		if err != nil {
			return fmt.Errorf("dispatcher: consumer for provider %s: %w", pc.Name, err)
		}
		consumers = append(consumers, cons)
	}
	// Calls in flight finish after Stop: they run on a context that Stop
	// does not cancel, bounded by each provider's timeout.
	return d.svc.Start(context.WithoutCancel(ctx), func(runCtx context.Context) {
		var loops sync.WaitGroup
		for i, pc := range d.cfg.Registry.Providers() {
			loops.Go(func() { d.consume(runCtx, consumers[i], pc.Name) })
		}
		loops.Wait()
		d.handlers.Wait()
	})
}

// Stop stops taking messages and waits for the calls in flight to finish
// and be recorded. It is safe to call more than once.
func (d *Dispatcher) Stop() { d.svc.Stop() }

// consume pulls one provider's messages into at most
// Concurrency*ClaimsAhead handlers before their create returns; of those,
// at most Concurrency are in a provider call at once (see
// Dispatcher.calls). A handler recording its answer has given its room
// back; the consumer's MaxAckPending bounds how many do.
func (d *Dispatcher) consume(runCtx context.Context, cons jetstream.Consumer, providerName string) {
	broker.Pull(runCtx, cons, d.cfg.Concurrency*ClaimsAhead, &d.handlers, d.log.With("provider", providerName), "dispatch messages",
		func(msg jetstream.Msg, free func()) { d.handle(runCtx, providerName, msg, free) })
}

// handle runs one dispatch message and settles it with JetStream. The ack
// only says the message was dealt with; the ledger says what happened.
// callsDone frees the message's room in the worker pool once its create
// has returned.
func (d *Dispatcher) handle(runCtx context.Context, providerName string, msg jetstream.Msg, callsDone func()) {
	ctx := context.WithoutCancel(runCtx)
	var m ledger.Dispatch
	if err := json.Unmarshal(msg.Data(), &m); err != nil || m.OperationID == uuid.Nil {
		d.log.ErrorContext(ctx, "malformed dispatch message dropped", "subject", msg.Subject(), "err", err)
		// Term, not TermWithReason: nats-server 2.9 (the oldest supported)
		// ignores a "+TERM" with a reason and redelivers the message
		// forever. The reason is in the log line.
		_ = msg.Term()
		return
	}
	if tp := msg.Headers().Get(tracing.Header); tp != "" {
		var span trace.Span
		ctx, span = d.tracer.Start(tracing.Context(ctx, tp), "dispatch "+providerName,
			trace.WithSpanKind(trace.SpanKindConsumer),
			trace.WithAttributes(tracing.Provider.String(providerName), tracing.OperationID.String(m.OperationID.String()),
				attribute.String("messaging.system", "nats"), attribute.String("messaging.destination.name", msg.Subject())))
		defer span.End()
	}
	err := d.execute(ctx, providerName, m, callsDone)
	var open *circuitOpenError
	var behind behindError
	switch {
	case errors.As(err, &open):
		// Nothing was claimed: the message comes back when a probe may go.
		_ = msg.NakWithDelay(min(max(open.wait, 100*time.Millisecond), provider.MaxBreakerCooldown))
	case errors.Is(err, errCrashed):
		return // a dead worker acknowledges nothing
	case errors.As(err, &behind):
		d.settleBehind(ctx, msg, ledger.Behind(behind))
	case err != nil:
		// Postgres or the provider config failed us: try again later.
		// Nothing is lost: the operation's state is in the ledger.
		d.log.WarnContext(ctx, "dispatch failed; message will be redelivered", "operation_id", m.OperationID, "err", err)
		_ = msg.NakWithDelay(2 * time.Second)
	default:
		_ = msg.Ack()
	}
}

// behindError is execute's answer to a dispatch message at a version the
// operation never reached: the ledger lost the changes that wrote it.
type behindError ledger.Behind

func (e behindError) Error() string { return ledger.Behind(e).String() }

// Unwrap makes a message naming an operation the ledger does not hold a
// ledger.ErrNotFound too, as the read that missed it said.
func (e behindError) Unwrap() error {
	if !e.Known {
		return ledger.ErrNotFound
	}
	return nil
}

// settleBehind deals with a message that names an operation the ledger
// does not hold, or a version it never reached: proof that committed work
// was lost (a failover to an asynchronous replica, a restore), unless the
// operation may have been pruned. Then dispatch is paused for every tenant
// (reason ledger_behind) and an ERROR names the message; requests are
// still accepted. A message for a possibly pruned operation is only
// logged. Either way the message is terminated; when the ledger cannot be
// asked or written, it comes back later instead.
func (d *Dispatcher) settleBehind(ctx context.Context, msg jetstream.Msg, b ledger.Behind) {
	if !b.Known {
		pruned, err := d.store.MayHaveBeenPruned(ctx, b.OperationID)
		if err != nil {
			d.log.WarnContext(ctx, "dispatch message names no operation; will ask again", "operation_id", b.OperationID, "err", err)
			_ = msg.NakWithDelay(2 * time.Second)
			return
		}
		if pruned {
			d.log.WarnContext(ctx, "dispatch message names no operation; it may have been pruned", "operation_id", b.OperationID,
				"version", b.Version)
			_ = msg.Term()
			return
		}
	}
	paused, err := d.store.LedgerBehind(ctx, b)
	if errors.Is(err, ledger.ErrBehindNotProven) {
		d.log.WarnContext(ctx, "a dispatch message seemed to name work the ledger lost, but the ledger holds it: judged again later", "operation_id", b.OperationID,
			"version", b.Version)
		_ = msg.NakWithDelay(2 * time.Second)
		return
	}
	if err != nil {
		d.log.WarnContext(ctx, "the ledger is behind its messages, and dispatch could not be paused yet; will try again", "operation_id", b.OperationID,
			"version", b.Version, "err", err)
		_ = msg.NakWithDelay(2 * time.Second)
		return
	}
	d.log.ErrorContext(ctx, "the ledger is behind its messages: committed work was lost (a failover or a restore); dispatch is paused for every tenant",
		"kind", b.Kind, "operation_id", b.OperationID, "version", b.Version, "ledger_version", b.At, "tenants_paused", paused)
	_ = msg.Term()
}
