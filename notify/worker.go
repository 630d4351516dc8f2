package notify

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/actledger/actledger/broker"
	"github.com/actledger/actledger/internal/startstop"
	"github.com/actledger/actledger/internal/testsignal"
	"github.com/actledger/actledger/ledger"
	"github.com/actledger/actledger/provider"
)

// Defaults of Config.
const (
	// DefaultRetryFor is how long an event is retried at a receiver
	// before it is given up.
	DefaultRetryFor = 24 * time.Hour
	// DefaultBackoffInitial is the wait after the first failed attempt,
	// doubled per attempt up to DefaultBackoffMax.
	DefaultBackoffInitial = time.Second
	DefaultBackoffMax     = 10 * time.Minute
	// DefaultTimeout bounds one attempt, answer included.
	DefaultTimeout = 10 * time.Second
	// DefaultConcurrency is how many requests one receiver has in flight
	// at most.
	DefaultConcurrency = 4
	// DefaultMaxPending bounds the events of one receiver taken from the
	// stream and not yet delivered or given up (those waiting for their
	// next attempt among them); past it the receiver's newer events wait
	// in the stream.
	DefaultMaxPending = 1000
	// DefaultConsoleURL is Config.ConsoleURL's default, the console of
	// `actledger serve` on its default listener.
	DefaultConsoleURL = "http://127.0.0.1:8080/console"
	// DefaultSweepInterval is how often the worker looks for stalled
	// notifications to publish again.
	DefaultSweepInterval = 30 * time.Second
	// DefaultRepublishMaxBackoff caps the wait between re-publishes of an
	// event that stays stalled (StallAfter, doubled per re-publish).
	DefaultRepublishMaxBackoff = 6 * time.Hour
	// DefaultSweepBatch is the most events one sweep publishes again.
	DefaultSweepBatch = 500
)

// Config configures a Worker. Zero values mean the documented defaults.
type Config struct {
	// Receivers are the providers file's notifications (Registry.
	// Notifications); each gets its own durable consumer.
	Receivers []*provider.Notification
	// ConsoleURL is the console's address as the people a receiver
	// notifies reach it; console_url links go under it. Default
	// DefaultConsoleURL.
	ConsoleURL string
	// RetryFor is how long after the event failed attempts are retried;
	// then it is given up. Default DefaultRetryFor.
	RetryFor time.Duration
	// BackoffInitial and BackoffMax shape the wait between attempts:
	// BackoffInitial doubled per failed attempt, at most BackoffMax.
	BackoffInitial, BackoffMax time.Duration
	// Timeout bounds one attempt. Default DefaultTimeout.
	Timeout time.Duration
	// Concurrency is the most requests in flight to one receiver.
	// Default DefaultConcurrency.
	Concurrency int
	// MaxPending bounds one receiver's events taken and not yet settled.
	// Default DefaultMaxPending.
	MaxPending int
	// StallAfter is how long an event may go unfinished at a receiver
	// with no attempt before its message is taken for lost and published
	// again. Default 2 × BackoffMax: longer than any wait between two
	// attempts.
	StallAfter time.Duration
	// RepublishMaxBackoff caps the wait between re-publishes of one event
	// (StallAfter doubled per re-publish). Default
	// DefaultRepublishMaxBackoff.
	RepublishMaxBackoff time.Duration
	// SweepInterval is how often stalled events are looked for. Default
	// DefaultSweepInterval.
	SweepInterval time.Duration
	// Client, when set, gives the HTTP client of a receiver (tests);
	// default NewClient(Timeout) for each.
	Client func(r *provider.Notification) *http.Client
	Logger *slog.Logger
	// Now is the clock of attempts; default time.Now.
	Now func() time.Time
}

func (cfg Config) withDefaults() Config {
	cfg.ConsoleURL = cmp.Or(cfg.ConsoleURL, DefaultConsoleURL)
	cfg.RetryFor = cmp.Or(cfg.RetryFor, DefaultRetryFor)
	cfg.BackoffInitial = cmp.Or(cfg.BackoffInitial, DefaultBackoffInitial)
	cfg.BackoffMax = cmp.Or(cfg.BackoffMax, DefaultBackoffMax)
	cfg.Timeout = cmp.Or(cfg.Timeout, DefaultTimeout)
	cfg.Concurrency = cmp.Or(cfg.Concurrency, DefaultConcurrency)
	cfg.MaxPending = cmp.Or(cfg.MaxPending, DefaultMaxPending)
	cfg.StallAfter = cmp.Or(cfg.StallAfter, 2*cfg.BackoffMax)
	cfg.RepublishMaxBackoff = cmp.Or(cfg.RepublishMaxBackoff, max(DefaultRepublishMaxBackoff, cfg.StallAfter))
	cfg.SweepInterval = cmp.Or(cfg.SweepInterval, DefaultSweepInterval)
	cfg.Logger = cmp.Or(cfg.Logger, slog.Default())
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Client == nil {
		timeout := cfg.Timeout
		cfg.Client = func(*provider.Notification) *http.Client { return NewClient(timeout) }
	}
	return cfg
}

func (cfg Config) validate() error {
	switch {
	case cfg.RetryFor < 0, cfg.BackoffInitial < 0, cfg.BackoffMax < 0, cfg.Timeout < 0,
		cfg.StallAfter < 0, cfg.RepublishMaxBackoff < 0, cfg.SweepInterval < 0:
		return errors.New("notify: Config durations must not be negative")
	case cfg.Concurrency < 0, cfg.MaxPending < 0:
		return errors.New("notify: Config.Concurrency and MaxPending must not be negative")
	case cfg.BackoffInitial > cfg.BackoffMax:
		return fmt.Errorf("notify: Config.BackoffInitial %s exceeds BackoffMax %s", cfg.BackoffInitial, cfg.BackoffMax)
	case cfg.StallAfter > cfg.RepublishMaxBackoff:
		return fmt.Errorf("notify: Config.StallAfter %s exceeds RepublishMaxBackoff %s", cfg.StallAfter, cfg.RepublishMaxBackoff)
	}
	return nil
}

// Worker delivers the notification stream's events to the receivers.
type Worker struct {
	store  *ledger.Store
	broker *broker.Broker
	cfg    Config
	log    *slog.Logger
	svc    startstop.Loop
	// handlers are the deliveries in flight; Stop waits for them.
	handlers sync.WaitGroup

	// TestSignals are armed by tests (TestSignals.Init) before Start;
	// unarmed, as in production, they do nothing.
	TestSignals TestSignals
}

// TestSignals are the moments of a running worker a test waits for,
// instead of sleeping through sweeps it hopes happened.
type TestSignals struct {
	// Swept: a sweep of stalled notifications ended without error (those
	// stalled published again, those finished settled).
	Swept testsignal.Signal[struct{}]
}

// Init arms every signal for tb.
func (ts *TestSignals) Init(tb testsignal.TB) { ts.Swept.Init(tb) }

// New returns a worker over store and broker; nothing runs until Start.
func New(store *ledger.Store, b *broker.Broker, cfg Config) (*Worker, error) {
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	return &Worker{store: store, broker: b, cfg: cfg, log: cfg.Logger.With("component", "notify")}, nil
}

// ConsumerName is the durable consumer of receiver, which every worker
// process shares.
func ConsumerName(prefix, receiver string) string { return prefix + "_notify_" + receiver }

// receiverRun is one receiver as a running worker serves it.
type receiverRun struct {
	r      *provider.Notification
	tenant uuid.UUID
	since  time.Time
	client *http.Client
	log    *slog.Logger
}

// Start stores the receivers in the ledger (from then on the changes of
// their tenants write the events they take), creates or updates each
// receiver's durable consumer and starts delivering. It returns at once.
func (w *Worker) Start(ctx context.Context) error {
	rs := make([]ledger.Receiver, len(w.cfg.Receivers))
	for i, r := range w.cfg.Receivers {
		events := make([]ledger.NotificationType, len(r.Events))
		for j, e := range r.Events {
			events[j] = ledger.NotificationType(e)
		}
		rs[i] = ledger.Receiver{Name: r.Name, Tenant: r.Tenant, Events: events}
	}
	synced, err := w.store.SyncReceivers(ctx, w.broker.NotifySubjectPrefix(), rs)
	if err != nil {
		return fmt.Errorf("notify: %w", err)
	}
	runs := make([]*receiverRun, len(synced))
	consumers := make([]jetstream.Consumer, len(synced))
	for i, s := range synced {
		r := w.cfg.Receivers[i]
		cons, err := w.broker.JetStream().CreateOrUpdateConsumer(ctx, w.broker.NotifyStream(), jetstream.ConsumerConfig{
			Durable:       ConsumerName(w.broker.Prefix(), r.Name),
			Description:   "actledger notifications for receiver " + r.Name,
			FilterSubject: ledger.NotificationSubject(w.broker.NotifySubjectPrefix(), s.TenantID) + ".>",
			AckPolicy:     jetstream.AckExplicitPolicy,
			AckWait:       w.cfg.Timeout + 2*time.Second,
			MaxDeliver:    -1,
			MaxAckPending: w.cfg.MaxPending,
			DeliverPolicy: jetstream.DeliverAllPolicy,
		})
		if err != nil {
			return fmt.Errorf("notify: consumer for receiver %s: %w", r.Name, err)
		}
		consumers[i] = cons
		runs[i] = &receiverRun{r: r, tenant: s.TenantID, since: s.Since, client: w.cfg.Client(r),
			log: w.log.With("receiver", r.Name, "tenant", r.Tenant)}
	}
	if err := w.dropGoneConsumers(ctx); err != nil {
		return err
	}
	// Deliveries in flight finish after Stop, each bounded by Timeout.
	return w.svc.Start(context.WithoutCancel(ctx), func(runCtx context.Context) {
		var loops sync.WaitGroup
		for i, run := range runs {
			loops.Go(func() { w.consume(runCtx, consumers[i], run) })
		}
		if len(runs) > 0 {
			loops.Go(func() {
				startstop.Every(runCtx, w.cfg.SweepInterval, w.republishStalled, func(ctx context.Context, err error) {
					w.log.WarnContext(ctx, "stalled-notification sweep failed; next interval tries again", "err", err)
				})
			})
		}
		loops.Wait()
		w.handlers.Wait()
	})
}

// Stop stops taking events and waits for the deliveries in flight. Safe to
// call more than once.
func (w *Worker) Stop() { w.svc.Stop() }

// consume pulls one receiver's events into at most Concurrency deliveries
// at once.
func (w *Worker) consume(runCtx context.Context, cons jetstream.Consumer, run *receiverRun) {
	broker.Pull(runCtx, cons, w.cfg.Concurrency, &w.handlers, run.log, "notifications",
		func(msg jetstream.Msg, _ func()) { w.handle(context.WithoutCancel(runCtx), run, msg) })
}

// handle delivers the event one message names to run's receiver, and
// settles the message: acknowledged once delivered, given up or not the
// receiver's; redelivered after the backoff otherwise.
func (w *Worker) handle(ctx context.Context, run *receiverRun, msg jetstream.Msg) {
	var m ledger.NotificationMessage
	if err := json.Unmarshal(msg.Data(), &m); err != nil || m.NotificationID == uuid.Nil {
		run.log.ErrorContext(ctx, "malformed notification message dropped", "subject", msg.Subject(), "err", err)
		// Term, not TermWithReason: nats-server 2.9 ignores the reason.
		_ = msg.Term()
		return
	}
	log := run.log.With("event_id", m.NotificationID)
	n, err := w.store.Notification(ctx, m.NotificationID)
	switch {
	case errors.Is(err, ledger.ErrNotFound):
		log.ErrorContext(ctx, "notification message names no event; dropped")
		_ = msg.Term()
		return
	case err != nil:
		log.WarnContext(ctx, "cannot read notification; will retry", "err", err)
		_ = msg.NakWithDelay(2 * time.Second)
		return
	}
	// The message is a pointer: only the row says whose event it is.
	if n.TenantID != run.tenant || !run.r.Takes(string(n.Type)) || n.At.Before(run.since) {
		_ = msg.Ack()
		return
	}
	if n.OperationID != nil {
		log = log.With("operation_id", *n.OperationID)
	}
	log = log.With("type", n.Type)
	d, err := w.store.Delivery(ctx, n.ID, run.r.Name)
	if err != nil {
		log.WarnContext(ctx, "cannot read delivery; will retry", "err", err)
		_ = msg.NakWithDelay(2 * time.Second)
		return
	}
	if d.Done() {
		_ = msg.Ack() // a redelivery of an event already delivered or given up
		return
	}
	attempt := d.Attempts + 1
	now := w.cfg.Now()
	answer, sendErr := Send(ctx, run.client, run.r, n.ID.String(), now, NewBody(n, w.cfg.ConsoleURL))
	if sendErr == nil && answer.OK() {
		if err := w.store.RecordDelivery(ctx, n.ID, run.r.Name, answer.Status, "", ledger.DeliveryDelivered); err != nil {
			// Delivered but not recorded: a redelivery sends it again
			// under the same webhook-id, which the receiver drops.
			log.WarnContext(ctx, "notification delivered, record failed", "err", err)
		}
		log.InfoContext(ctx, "notification delivered", "attempt", attempt, "status", answer.Status)
		_ = msg.Ack()
		return
	}
	why := "answered " + http.StatusText(answer.Status)
	if sendErr != nil {
		why = sendErr.Error()
	}
	if now.Sub(n.At) >= w.cfg.RetryFor {
		if err := w.store.RecordDelivery(ctx, n.ID, run.r.Name, answer.Status, why, ledger.DeliveryGivenUp); err != nil {
			log.WarnContext(ctx, "cannot record a given-up notification; will retry", "err", err)
			_ = msg.NakWithDelay(2 * time.Second)
			return
		}
		log.ErrorContext(ctx, "notification given up: the receiver did not take it within the retry window",
			"attempt", attempt, "status", answer.Status, "err", why, "retry_for", w.cfg.RetryFor)
		_ = msg.Ack()
		return
	}
	if err := w.store.RecordDelivery(ctx, n.ID, run.r.Name, answer.Status, why, ledger.DeliveryRetrying); err != nil {
		log.WarnContext(ctx, "cannot record a failed notification attempt", "err", err)
	}
	wait := provider.RetryPolicy{Initial: provider.Duration{Duration: w.cfg.BackoffInitial}, Max: provider.Duration{Duration: w.cfg.BackoffMax}}.Delay(attempt)
	wait = min(wait, max(n.At.Add(w.cfg.RetryFor).Sub(now), time.Millisecond))
	log.WarnContext(ctx, "notification attempt failed; will retry", "attempt", attempt, "status", answer.Status, "err", why, "retry_in", wait)
	_ = msg.NakWithDelay(wait)
}

// republishStalled publishes again the events whose delivery stalled: not
// finished at a receiver that takes them, and no attempt there within
// StallAfter. Their message was lost; a receiver already done with one is
// not sent it again (handle reads its delivery first).
func (w *Worker) republishStalled(ctx context.Context) error {
	events, err := w.store.RepublishStalled(ctx, w.cfg.StallAfter, w.cfg.RepublishMaxBackoff, DefaultSweepBatch)
	if err != nil {
		return fmt.Errorf("notify: %w", err)
	}
	for _, e := range events {
		w.log.WarnContext(ctx, "notification stalled; published again",
			"event_id", e.ID, "type", e.Type, "tenant", e.Tenant, "receivers", e.Receivers,
			"republishes", e.Republishes, "stall_after", w.cfg.StallAfter)
	}
	w.TestSignals.Swept.Signal(struct{}{})
	return nil
}

// dropGoneConsumers deletes the durable consumers of receivers that are no
// longer in the providers file (SyncReceivers removed them from the
// ledger): nothing would ever read them, and the stream would keep their
// state.
func (w *Worker) dropGoneConsumers(ctx context.Context) error {
	stream, err := w.broker.JetStream().Stream(ctx, w.broker.NotifyStream())
	if err != nil {
		return fmt.Errorf("notify: stream %s: %w", w.broker.NotifyStream(), err)
	}
	keep := make(map[string]bool, len(w.cfg.Receivers))
	for _, r := range w.cfg.Receivers {
		keep[ConsumerName(w.broker.Prefix(), r.Name)] = true
	}
	prefix := ConsumerName(w.broker.Prefix(), "")
	names := stream.ConsumerNames(ctx)
	var gone []string
	for name := range names.Name() {
		if strings.HasPrefix(name, prefix) && !keep[name] {
			gone = append(gone, name)
		}
	}
	if err := names.Err(); err != nil {
		return fmt.Errorf("notify: list consumers: %w", err)
	}
	for _, name := range gone {
		if err := stream.DeleteConsumer(ctx, name); err != nil && !errors.Is(err, jetstream.ErrConsumerNotFound) {
			return fmt.Errorf("notify: delete consumer %s of a receiver no longer configured: %w", name, err)
		}
		w.log.InfoContext(ctx, "deleted the consumer of a receiver no longer configured", "consumer", name)
	}
	return nil
}
