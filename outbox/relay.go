package outbox

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

	"github.com/actledger/actledger/internal/startstop"
)

// Channel is the LISTEN/NOTIFY channel the outbox insert trigger notifies.
const Channel = "actledger_outbox"

// Config configures a Relay. Zero values mean the documented defaults.
type Config struct {
	// BatchSize is how many rows one claim takes. Default 3000 (below the
	// broker's 4,096 pending asynchronous publishes).
	BatchSize int
	// PollInterval is how often the relay looks for rows without a
	// notification (a lost NOTIFY only delays a message). Default 1s.
	PollInterval time.Duration
	// PublishTimeout bounds the wait for a batch's acknowledgements.
	// Default 10s.
	PublishTimeout time.Duration
	// Retention is how long published rows are kept before they are
	// deleted. Default 24h.
	Retention time.Duration
	Logger    *slog.Logger
}

// Relay publishes outbox rows to JetStream. Run several: they share rows
// without overlap.
type Relay struct {
	pool *pgxpool.Pool
	js   jetstream.JetStream
	cfg  Config
	log  *slog.Logger

	// beforeMark, when set by tests, runs after the batch was published
	// and before it is marked; an error aborts the batch as a crash would.
	beforeMark func() error

	svc  startstop.Loop
	wake chan struct{}

	published  atomic.Uint64
	duplicates atomic.Uint64
}

// Stats counts what one relay did since it was created.
type Stats struct {
	// Published rows were acknowledged by JetStream and marked.
	Published uint64
	// Duplicates were acknowledged as duplicates: JetStream already held
	// a message with their Nats-Msg-Id (a republish after a crash).
	Duplicates uint64
}

// Stats returns the relay's counters.
func (r *Relay) Stats() Stats {
	return Stats{Published: r.published.Load(), Duplicates: r.duplicates.Load()}
}

// NewRelay returns a relay that reads pool's outbox and publishes to js.
func NewRelay(pool *pgxpool.Pool, js jetstream.JetStream, cfg Config) *Relay {
	cfg.BatchSize = cmp.Or(cfg.BatchSize, 3000)
	cfg.PollInterval = cmp.Or(cfg.PollInterval, time.Second)
	cfg.PublishTimeout = cmp.Or(cfg.PublishTimeout, 10*time.Second)
	cfg.Retention = cmp.Or(cfg.Retention, 24*time.Hour)
	return &Relay{
		pool: pool, js: js, cfg: cfg,
		log:  cmp.Or(cfg.Logger, slog.Default()).With("component", "relay"),
		wake: make(chan struct{}, 1),
	}
}

const (
	outboxClaim = `SELECT id, subject, msg_id, payload FROM outbox
WHERE published_at IS NULL AND (deliver_after IS NULL OR deliver_after <= now())
ORDER BY id
LIMIT $1
FOR UPDATE SKIP LOCKED`

	outboxMarkPublished = `UPDATE outbox SET published_at = now() WHERE id = ANY ($1)`

	outboxDeletePublished = `DELETE FROM outbox WHERE published_at < now() - $1::interval`

	outboxNextDue = `SELECT min(deliver_after) FROM outbox
WHERE published_at IS NULL AND deliver_after > now()`

	// outboxBacklog counts rows that are due and unpublished; scheduled
	// retries are not lag.
	outboxBacklog = `SELECT count(*), coalesce(extract(epoch FROM now() - min(coalesce(deliver_after, created_at))), 0)
FROM outbox WHERE published_at IS NULL AND (deliver_after IS NULL OR deliver_after <= now())`
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
		sleep(ctx, r.cfg.PollInterval)
	}
}

func (r *Relay) listenOnce(ctx context.Context) error {
	conn, err := r.pool.Acquire(ctx)
	if err != nil {
		return err
	}
	defer conn.Release()
	if _, err := conn.Exec(ctx, "LISTEN "+Channel); err != nil {
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

func (r *Relay) run(ctx context.Context) {
	ticker := time.NewTicker(r.cfg.PollInterval)
	defer ticker.Stop()
	cleanup := time.NewTicker(max(time.Minute, r.cfg.Retention/24))
	defer cleanup.Stop()
	failures := 0
	for {
		n, err := r.PublishBatch(ctx)
		switch {
		case ctx.Err() != nil:
			return
		case err != nil:
			failures++
			wait := min(time.Duration(failures)*r.cfg.PollInterval/4+50*time.Millisecond, 5*time.Second)
			r.log.WarnContext(ctx, "outbox batch failed; will retry", "err", err, "retry_in", wait)
			sleep(ctx, wait)
			continue
		case n == r.cfg.BatchSize:
			failures = 0
			continue // more rows are probably waiting
		}
		failures = 0
		due := r.nextDue(ctx)
		select {
		case <-ctx.Done():
			return
		case <-r.wake:
		case <-ticker.C:
		case <-due:
		case <-cleanup.C:
			r.deletePublished(ctx)
		}
	}
}

// nextDue returns a channel that fires when the earliest scheduled row is
// due (nil, which never fires, when none is scheduled before the next poll).
func (r *Relay) nextDue(ctx context.Context) <-chan time.Time {
	var at *time.Time
	if err := r.pool.QueryRow(ctx, outboxNextDue).Scan(&at); err != nil || at == nil {
		return nil
	}
	wait := time.Until(*at)
	if wait >= r.cfg.PollInterval {
		return nil
	}
	return time.After(max(wait, time.Millisecond))
}

func (r *Relay) deletePublished(ctx context.Context) {
	tag, err := r.pool.Exec(ctx, outboxDeletePublished, r.cfg.Retention.String())
	if err != nil {
		r.log.WarnContext(ctx, "delete published outbox rows", "err", err)
		return
	}
	if tag.RowsAffected() > 0 {
		r.log.DebugContext(ctx, "deleted published outbox rows", "rows", tag.RowsAffected())
	}
}

type row struct {
	ID      int64  `db:"id"`
	Subject string `db:"subject"`
	MsgID   string `db:"msg_id"`
	Payload []byte `db:"payload"`
}

// PublishBatch claims up to BatchSize unpublished rows, publishes them and
// marks those JetStream acknowledged, in one transaction that holds the row
// locks throughout. It returns how many rows it claimed.
func (r *Relay) PublishBatch(ctx context.Context) (int, error) {
	tx, err := r.pool.Begin(ctx)
	if err != nil {
		return 0, fmt.Errorf("outbox: begin: %w", err)
	}
	defer tx.Rollback(context.WithoutCancel(ctx))

	rows, _ := tx.Query(ctx, outboxClaim, r.cfg.BatchSize)
	batch, err := pgx.CollectRows(rows, pgx.RowToStructByName[row])
	if err != nil {
		return 0, fmt.Errorf("outbox: claim: %w", err)
	}
	if len(batch) == 0 {
		return 0, nil
	}

	futures := make([]jetstream.PubAckFuture, len(batch))
	var publishErr error
	for i, m := range batch {
		msg := &nats.Msg{Subject: m.Subject, Data: m.Payload, Header: nats.Header{}}
		// With more acknowledgements pending than the connection allows
		// (a BatchSize above 4,096, or a slow server), a publish waits
		// for room for as long as the batch may take, not nats.go's 200 ms.
		futures[i], err = r.js.PublishMsgAsync(msg, jetstream.WithMsgID(m.MsgID), jetstream.WithStallWait(r.cfg.PublishTimeout))
		if err != nil {
			publishErr = fmt.Errorf("outbox: publish %s: %w", m.MsgID, err)
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
			if ack.Duplicate {
				duplicates++
				r.log.InfoContext(ctx, "republished outbox row was a duplicate; JetStream kept one copy",
					"msg_id", batch[i].MsgID, "stream", ack.Stream, "seq", ack.Sequence)
			}
		case err := <-f.Err():
			publishErr = errors.Join(publishErr, fmt.Errorf("outbox: publish %s: %w", batch[i].MsgID, err))
		case <-timeout.C:
			publishErr = errors.Join(publishErr, fmt.Errorf("outbox: %d acknowledgements not received within %s", len(futures)-i, r.cfg.PublishTimeout))
			break wait
		case <-ctx.Done():
			publishErr = errors.Join(publishErr, ctx.Err())
			break wait
		}
	}

	if r.beforeMark != nil {
		if err := r.beforeMark(); err != nil {
			return len(batch), err
		}
	}
	if len(published) > 0 {
		if _, err := tx.Exec(ctx, outboxMarkPublished, published); err != nil {
			return len(batch), fmt.Errorf("outbox: mark published: %w", err)
		}
		if err := tx.Commit(ctx); err != nil {
			return len(batch), fmt.Errorf("outbox: commit: %w", err)
		}
		r.published.Add(uint64(len(published)))
		r.duplicates.Add(uint64(duplicates))
	}
	if duplicates > 0 || publishErr != nil {
		r.log.DebugContext(ctx, "outbox batch", "claimed", len(batch), "published", len(published), "duplicates", duplicates)
	}
	return len(batch), publishErr
}

// Backlog returns how many rows wait to be published and the age of the
// oldest, for metrics and readiness.
func Backlog(ctx context.Context, db interface {
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}) (rows int64, oldest time.Duration, err error) {
	var secs float64
	if err := db.QueryRow(ctx, outboxBacklog).Scan(&rows, &secs); err != nil {
		return 0, 0, fmt.Errorf("outbox: backlog: %w", err)
	}
	return rows, time.Duration(secs * float64(time.Second)), nil
}

func sleep(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}
