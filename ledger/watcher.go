package ledger

import (
	"cmp"
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/actledger/actledger/internal/startstop"
)

// OperationChannel is the LISTEN/NOTIFY channel on which the database
// announces every new version of an operation (schema 013's trigger
// operation_changed, payload the operation's id), whichever process made
// the change.
const OperationChannel = "actledger_operation"

// watcherRetry is how long the watcher waits before listening again after
// its connection failed.
const watcherRetry = time.Second

// Watcher tells readers waiting for an operation to change (a long-polling
// GET) that it has. It holds one connection per process in LISTEN and fans
// each notification out in memory, so a thousand waiters cost one Postgres
// connection, not a thousand, and nobody polls.
//
// A wake-up says only that the operation may have changed: the waiter
// reads it again and decides. Whenever the listening connection is
// (re)established every waiter is woken, since notifications sent while it
// was down are lost; a waiter must never wait on a stale belief.
type Watcher struct {
	pool *pgxpool.Pool
	log  *slog.Logger
	svc  startstop.Service

	mu      sync.Mutex
	waiters map[uuid.UUID]map[chan struct{}]struct{}
	n       int
}

// NewWatcher returns a watcher that listens through one connection of
// pool once started.
func NewWatcher(pool *pgxpool.Pool, logger *slog.Logger) *Watcher {
	return &Watcher{
		pool:    pool,
		log:     cmp.Or(logger, slog.Default()).With("component", "operation_watcher"),
		waiters: make(map[uuid.UUID]map[chan struct{}]struct{}),
	}
}

// Start listens in the background until Stop, reconnecting after failures.
func (w *Watcher) Start(ctx context.Context) error {
	return w.svc.Start(ctx, func(ctx context.Context) {
		for ctx.Err() == nil {
			err := w.listen(ctx)
			if ctx.Err() != nil {
				return
			}
			w.log.WarnContext(ctx, "operation listener lost; waiters answer at the end of their wait until it is back", "err", err)
			select {
			case <-ctx.Done():
			case <-time.After(watcherRetry):
			}
		}
	})
}

// Stop stops listening. Waiters are not woken: they answer when their own
// wait runs out.
func (w *Watcher) Stop() { w.svc.Stop() }

// Watch registers interest in operation id: changed receives a value
// (without blocking the watcher; one pending value is kept) each time the
// operation may have changed. Call stop when done. Register before reading
// the operation, so that a change between the read and the wait is not
// missed.
func (w *Watcher) Watch(id uuid.UUID) (changed <-chan struct{}, stop func()) {
	ch := make(chan struct{}, 1)
	w.mu.Lock()
	set := w.waiters[id]
	if set == nil {
		set = make(map[chan struct{}]struct{})
		w.waiters[id] = set
	}
	set[ch] = struct{}{}
	w.n++
	w.mu.Unlock()
	var once sync.Once
	return ch, func() {
		once.Do(func() {
			w.mu.Lock()
			defer w.mu.Unlock()
			delete(set, ch)
			if len(set) == 0 {
				delete(w.waiters, id)
			}
			w.n--
		})
	}
}

// Waiting is how many waiters are registered now.
func (w *Watcher) Waiting() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.n
}

// listen holds one pool connection in LISTEN and wakes the waiters of
// every operation it hears of, until the connection fails or ctx ends.
func (w *Watcher) listen(ctx context.Context) error {
	conn, err := w.pool.Acquire(ctx)
	if err != nil {
		return err
	}
	defer conn.Release()
	// The connection holds a LISTEN (or may hold one half set up): it is
	// never handed back to the pool for other work.
	defer conn.Conn().PgConn().Close(context.WithoutCancel(ctx))
	if _, err := conn.Exec(ctx, "LISTEN "+OperationChannel); err != nil {
		return err
	}
	w.wakeAll()
	for {
		n, err := conn.Conn().WaitForNotification(ctx)
		if err != nil {
			return err
		}
		id, err := uuid.Parse(n.Payload)
		if err != nil {
			w.log.WarnContext(ctx, "operation notification without an operation id ignored", "payload", n.Payload)
			continue
		}
		w.wake(id)
	}
}

// wake tells the waiters of operation id.
func (w *Watcher) wake(id uuid.UUID) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for ch := range w.waiters[id] {
		signal(ch)
	}
}

// wakeAll tells every waiter, after a time in which notifications may
// have been lost.
func (w *Watcher) wakeAll() {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, set := range w.waiters {
		for ch := range set {
			signal(ch)
		}
	}
}

func signal(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}
