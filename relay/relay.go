package relay

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/actledger/actledger/internal/startstop"
	"github.com/actledger/actledger/internal/testsignal"
	"github.com/actledger/actledger/outbox"
	"github.com/actledger/actledger/tracing"
)

// Defaults for the zero values of Config, applied in one place
// (Config.WithDefaults).
const (
	// DefaultBatchSize stays below the broker's 4,096 pending asynchronous
	// publishes, so a batch never waits for room to publish.
	DefaultBatchSize = 3000
	// DefaultPollInterval bounds how long a lost NOTIFY delays a message.
	DefaultPollInterval = time.Second
	// DefaultPublishTimeout bounds the wait for a batch's acknowledgements.
	DefaultPublishTimeout = 10 * time.Second
)

// Config configures a Relay. Zero values mean the Default… constants.
type Config struct {
	// BatchSize is how many rows one claim takes (DefaultBatchSize).
	BatchSize int
	// PollInterval is how often the relay looks for rows without a
	// notification (DefaultPollInterval).
	PollInterval time.Duration
	// PublishTimeout bounds the wait for a batch's acknowledgements
	// (DefaultPublishTimeout).
	PublishTimeout time.Duration
	// Now is the clock rows scheduled for later (a retry, a lookup after
	// a supplier's visibility lag) are due by; nil is the database's
	// now(). The ledger that schedules them must use the same clock.
	Now    func() time.Time
	Logger *slog.Logger
	// TracerProvider makes the publish span of a row that carries a trace
	// context. Default: otel's global provider.
	TracerProvider trace.TracerProvider
}

// WithDefaults returns cfg with its zero values replaced by the defaults
// (the Default… constants and slog's default logger), as New applies it.
func (cfg Config) WithDefaults() Config {
	cfg.BatchSize = cmp.Or(cfg.BatchSize, DefaultBatchSize)
	cfg.PollInterval = cmp.Or(cfg.PollInterval, DefaultPollInterval)
	cfg.PublishTimeout = cmp.Or(cfg.PublishTimeout, DefaultPublishTimeout)
	cfg.Logger = cmp.Or(cfg.Logger, slog.Default())
	return cfg
}

// validate refuses values no relay can run with: a negative one, which a
// caller may have computed by mistake, is never taken for "the default".
func (cfg Config) validate() error {
	switch {
	case cfg.BatchSize <= 0:
		return fmt.Errorf("relay: BatchSize must be positive, got %d", cfg.BatchSize)
	case cfg.PollInterval <= 0:
		return fmt.Errorf("relay: PollInterval must be positive, got %s", cfg.PollInterval)
	case cfg.PublishTimeout <= 0:
		return fmt.Errorf("relay: PublishTimeout must be positive, got %s", cfg.PublishTimeout)
	}
	return nil
}

// Relay publishes outbox rows to JetStream. Run several: they share rows
// without overlap.
type Relay struct {
	pool   *pgxpool.Pool
	js     jetstream.JetStream
	cfg    Config
	log    *slog.Logger
	tracer trace.Tracer

	svc  startstop.Loop
	wake chan struct{}

	published  atomic.Uint64
	duplicates atomic.Uint64

	// TestSignals are armed by tests (TestSignals.Init) before Start;
	// unarmed, as in production, they do nothing.
	TestSignals TestSignals
	// TestHooks are set by tests before Start or PublishBatch; unset, as
	// in production, they do nothing.
	TestHooks TestHooks
}

// TestHooks are the points where a test makes a relay fail as a crash
// would.
type TestHooks struct {
	// BeforeDelete runs after a batch was published and before its rows
	// are deleted; an error aborts the batch as a crash would.
	BeforeDelete func() error
}

// TestSignals are the moments of a running relay a test waits for,
// instead of sleeping until it has probably looked.
type TestSignals struct {
	// Idle: the relay found nothing more to publish and waits for a
	// wake-up or its poll, with no scheduled row or recheck due before
	// the poll. The value counts the wake-ups it has taken since Start:
	// the first, unless a writer woke it sooner, is its listener's, sent
	// once LISTEN holds.
	Idle testsignal.Signal[int]
	// BatchFailed: a batch was not published (the error says why); its
	// rows stay in the outbox for the next one.
	BatchFailed testsignal.Signal[error]
}

// Init arms every signal for tb.
func (ts *TestSignals) Init(tb testsignal.TB) {
	ts.Idle.Init(tb)
	ts.BatchFailed.Init(tb)
}

// Stats counts what one relay did since it was created.
type Stats struct {
	// Published rows were acknowledged by JetStream and deleted.
	Published uint64
	// Duplicates were acknowledged as duplicates: JetStream already held
	// a message with their Nats-Msg-Id (a republish after a crash).
	Duplicates uint64
}

// Stats returns the relay's counters.
func (r *Relay) Stats() Stats {
	return Stats{Published: r.published.Load(), Duplicates: r.duplicates.Load()}
}

// New returns a relay that reads pool's outbox and publishes to js. It
// fails on a Config that validate refuses.
func New(pool *pgxpool.Pool, js jetstream.JetStream, cfg Config) (*Relay, error) {
	if pool == nil || js == nil {
		return nil, errors.New("relay: New needs a pool and a JetStream context")
	}
	cfg = cfg.WithDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	return &Relay{
		pool: pool, js: js, cfg: cfg,
		log:    cfg.Logger.With("component", "relay"),
		tracer: tracing.Tracer(cfg.TracerProvider),
		wake:   make(chan struct{}, 1),
	}, nil
}

const (
	// outboxBegin starts a batch's transaction without waiting for its
	// commit to be flushed to disk. A delete lost in a crash of Postgres
	// (the last few hundred milliseconds of commits) is a crash between
	// publish and delete: the rows are published again under the same
	// Nats-Msg-Id, which JetStream's duplicate window absorbs and the
	// consumers' conditional claims ignore. So the relay, alone on the
	// path from an enqueue to its dispatcher, never waits for a disk
	// flush of its own.
	outboxBegin = `BEGIN; SET LOCAL synchronous_commit TO off`

	outboxClaim = `SELECT id, subject, msg_id, payload, traceparent FROM outbox
WHERE published_at IS NULL AND (deliver_after IS NULL OR deliver_after <= coalesce($2::timestamptz, now()))
ORDER BY id
LIMIT $1
FOR UPDATE SKIP LOCKED`

	// outboxDeletePublished removes the rows JetStream acknowledged, in
	// the transaction whose claim still locks them: a published row is
	// gone, not marked. Setting published_at instead made every row a
	// second version (a non-HOT update, with a new primary-key entry) and
	// a dead tuple, deleted again later; the delete is one small WAL
	// record (docs/benchmarks.md, "What changed, and what each change
	// bought": the relay deletes a published row). The message itself is
	// in the stream, under the row's msg_id.
	outboxDeletePublished = `DELETE FROM outbox WHERE id = ANY ($1)`

	outboxNextDue = `SELECT min(deliver_after) FROM outbox
WHERE published_at IS NULL AND deliver_after > coalesce($1::timestamptz, now())`
)

// Start runs the relay in the background until Stop or ctx ends. It
// returns at once.
func (r *Relay) Start(ctx context.Context) error {
	return r.svc.Start(ctx, func(ctx context.Context) {
		var wg sync.WaitGroup
		wg.Go(func() { r.listen(ctx) })
		wg.Go(func() { r.run(ctx) })
		wg.Wait()
	})
}

// Stop stops the relay and waits for the batch in flight to finish. It is
// safe to call more than once.
func (r *Relay) Stop() { r.svc.Stop() }

// Wake makes the relay look for rows now, as a notification would: a
// writer in the same process calls it after its commit (see
// outbox.Notifier.Local).
func (r *Relay) Wake() { r.signal() }

func (r *Relay) signal() {
	select {
	case r.wake <- struct{}{}:
	default:
	}
}

// listen holds one connection in LISTEN and turns notifications into
// wake-ups, reconnecting after failures.
func (r *Relay) listen(ctx context.Context) {
	for ctx.Err() == nil {
		err := r.listenOnce(ctx)
		if ctx.Err() != nil {
			return
		}
		r.log.WarnContext(ctx, "outbox listener lost; polling until it is back", "err", err)
		startstop.Sleep(ctx, r.cfg.PollInterval)
	}
}

func (r *Relay) listenOnce(ctx context.Context) error {
	conn, err := r.pool.Acquire(ctx)
	if err != nil {
		return err
	}
	defer conn.Release()
	if _, err := conn.Exec(ctx, "LISTEN "+outbox.Channel); err != nil {
		return err
	}
	r.signal()
	for {
		if _, err := conn.Conn().WaitForNotification(ctx); err != nil {
			// The connection may hold a pending LISTEN; never return it.
			conn.Conn().PgConn().Close(context.WithoutCancel(ctx))
			return err
		}
		r.signal()
	}
}

// dueRecheck is how often, at most, a busy relay asks when the next
// scheduled row is due: under load it is woken every few milliseconds, and
// scheduled rows (retries, lookups) are due seconds apart.
const dueRecheck = 50 * time.Millisecond

func (r *Relay) run(ctx context.Context) {
	ticker := time.NewTicker(r.cfg.PollInterval)
	defer ticker.Stop()
	failures := 0
	var (
		due        <-chan time.Time // fires when the earliest scheduled row is due
		dueChecked time.Time
		wakes      int // wake-ups taken, for TestSignals.Idle
	)
	for {
		n, err := r.PublishBatch(ctx)
		switch {
		case ctx.Err() != nil:
			return
		case err != nil:
			failures++
			wait := min(time.Duration(failures)*r.cfg.PollInterval/4+50*time.Millisecond, 5*time.Second)
			r.log.WarnContext(ctx, "outbox batch failed; will retry", "err", err, "retry_in", wait)
			r.TestSignals.BatchFailed.Signal(err)
			startstop.Sleep(ctx, wait)
			continue
		case n == r.cfg.BatchSize:
			failures = 0
			continue // more rows are probably waiting
		}
		failures = 0
		var recheck <-chan time.Time
		if since := time.Since(dueChecked); since >= dueRecheck {
			due, dueChecked = r.nextDue(ctx), time.Now()
		} else {
			recheck = time.After(dueRecheck - since)
		}
		if due == nil && recheck == nil {
			r.TestSignals.Idle.Signal(wakes)
		}
		select {
		case <-ctx.Done():
			return
		case <-r.wake:
			wakes++
		case <-ticker.C:
		case <-recheck:
		case <-due:
			dueChecked = time.Time{} // find the next one at once
		}
	}
}

// nowArg is the clock as a query argument: nil, the database's now(),
// without Config.Now.
func (r *Relay) nowArg() *time.Time {
	if r.cfg.Now == nil {
		return nil
	}
	now := r.cfg.Now()
	return &now
}

// nextDue returns a channel that fires when the earliest scheduled row is
// due (nil, which never fires, when none is scheduled before the next poll).
func (r *Relay) nextDue(ctx context.Context) <-chan time.Time {
	var at *time.Time
	if err := r.pool.QueryRow(ctx, outboxNextDue, r.nowArg()).Scan(&at); err != nil || at == nil {
		return nil
	}
	now := time.Now()
	if r.cfg.Now != nil {
		now = r.cfg.Now()
	}
	wait := at.Sub(now)
	if wait >= r.cfg.PollInterval {
		return nil
	}
	return time.After(max(wait, time.Millisecond))
}

type row struct {
	ID      int64  `db:"id"`
	Subject string `db:"subject"`
	MsgID   string `db:"msg_id"`
	Payload []byte `db:"payload"`
	// Traceparent is the row's trace context; nil for none.
	Traceparent *string `db:"traceparent"`
}

// publishSpan starts the publish span of row m, a child of the context the
// row carries, and returns it with the message's headers: the traceparent
// of the span, lower-case as W3C spells it. A row without a trace context
// gets no span (nil) and no header.
func (r *Relay) publishSpan(ctx context.Context, m row) (trace.Span, nats.Header) {
	h := nats.Header{}
	if m.Traceparent == nil {
		return nil, h
	}
	ctx, span := r.tracer.Start(tracing.Context(ctx, *m.Traceparent), "publish "+m.Subject,
		trace.WithSpanKind(trace.SpanKindProducer),
		trace.WithAttributes(attribute.String("messaging.system", "nats"), attribute.String("messaging.destination.name", m.Subject),
			attribute.String("messaging.message.id", m.MsgID)))
	if tp := tracing.Traceparent(ctx); tp != "" {
		// nats.Header.Set would keep the key as given too; a direct write
		// says so.
		h[tracing.Header] = []string{tp}
	}
	return span, h
}

// errNotAcknowledged is the status of a publish span whose message got no
// acknowledgement before the batch ended.
var errNotAcknowledged = errors.New("relay: not acknowledged")

// endSpan ends a publish span (nil: none), with err as its status.
func endSpan(span trace.Span, err error) {
	if span == nil {
		return
	}
	if err != nil {
		span.SetStatus(codes.Error, err.Error())
	}
	span.End()
}

// PublishBatch claims up to BatchSize unpublished rows, publishes them and
// deletes those JetStream acknowledged, in one transaction that holds the
// row locks throughout: another relay skips them until the delete commits,
// and a row whose acknowledgement did not come stays for the next batch.
// It returns how many rows it claimed.
func (r *Relay) PublishBatch(ctx context.Context) (int, error) {
	tx, err := r.pool.BeginTx(ctx, pgx.TxOptions{BeginQuery: outboxBegin})
	if err != nil {
		return 0, fmt.Errorf("relay: begin: %w", err)
	}
	defer tx.Rollback(context.WithoutCancel(ctx))

	rows, _ := tx.Query(ctx, outboxClaim, r.cfg.BatchSize, r.nowArg())
	batch, err := pgx.CollectRows(rows, pgx.RowToStructByName[row])
	if err != nil {
		return 0, fmt.Errorf("relay: claim: %w", err)
	}
	if len(batch) == 0 {
		return 0, nil
	}

	futures := make([]jetstream.PubAckFuture, len(batch))
	// spans holds the publish span of each row that carries a trace
	// context; nil when none of the batch does.
	var spans []trace.Span
	defer func() {
		for _, span := range spans {
			endSpan(span, errNotAcknowledged) // a span not ended below
		}
	}()
	var publishErr error
	for i, m := range batch {
		span, header := r.publishSpan(ctx, m)
		if span != nil {
			if spans == nil {
				spans = make([]trace.Span, len(batch))
			}
			spans[i] = span
		}
		msg := &nats.Msg{Subject: m.Subject, Data: m.Payload, Header: header}
		// With more acknowledgements pending than the connection allows
		// (a BatchSize above 4,096, or a slow server), a publish waits
		// for room for as long as the batch may take, not nats.go's 200 ms.
		futures[i], err = r.js.PublishMsgAsync(msg, jetstream.WithMsgID(m.MsgID), jetstream.WithStallWait(r.cfg.PublishTimeout))
		if err != nil {
			publishErr = fmt.Errorf("relay: publish %s: %w", m.MsgID, err)
			futures = futures[:i]
			break
		}
	}

	published := make([]int64, 0, len(futures))
	timeout := time.NewTimer(r.cfg.PublishTimeout)
	defer timeout.Stop()
	duplicates := 0
wait:
	for i, f := range futures {
		select {
		case ack := <-f.Ok():
			published = append(published, batch[i].ID)
			if spans != nil {
				endSpan(spans[i], nil)
				spans[i] = nil
			}
			if ack.Duplicate {
				duplicates++
				r.log.InfoContext(ctx, "republished outbox row was a duplicate; JetStream kept one copy",
					"msg_id", batch[i].MsgID, "stream", ack.Stream, "seq", ack.Sequence)
			}
		case err := <-f.Err():
			publishErr = errors.Join(publishErr, fmt.Errorf("relay: publish %s: %w", batch[i].MsgID, err))
			if spans != nil {
				endSpan(spans[i], err)
				spans[i] = nil
			}
		case <-timeout.C:
			publishErr = errors.Join(publishErr, fmt.Errorf("relay: %d acknowledgements not received within %s", len(futures)-i, r.cfg.PublishTimeout))
			break wait
		case <-ctx.Done():
			publishErr = errors.Join(publishErr, ctx.Err())
			break wait
		}
	}

	if r.TestHooks.BeforeDelete != nil {
		if err := r.TestHooks.BeforeDelete(); err != nil {
			return len(batch), err
		}
	}
	if len(published) > 0 {
		if _, err := tx.Exec(ctx, outboxDeletePublished, published); err != nil {
			return len(batch), fmt.Errorf("relay: delete published: %w", err)
		}
		if err := tx.Commit(ctx); err != nil {
			return len(batch), fmt.Errorf("relay: commit: %w", err)
		}
		r.published.Add(uint64(len(published)))
		r.duplicates.Add(uint64(duplicates))
	}
	if duplicates > 0 || publishErr != nil {
		r.log.DebugContext(ctx, "outbox batch", "claimed", len(batch), "published", len(published), "duplicates", duplicates)
	}
	return len(batch), publishErr
}
