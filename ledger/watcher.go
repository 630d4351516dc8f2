package ledger

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/actledger/actledger/internal/startstop"
)

// OperationChannel is the LISTEN/NOTIFY channel on which the database
// announces a new version of a watched operation (the trigger
// operation_changed of schema 013, once per statement since 015; payload
// the operation's id), whichever process made the change.
const OperationChannel = "actledger_operation"

// Watcher timings.
const (
	// watcherRetry is how long the watcher waits before listening again
	// after its connection failed.
	watcherRetry = time.Second
	// watcherTend is how often it refreshes its registrations and drops
	// the ones nobody waits on.
	watcherTend = 10 * time.Second
	// watchGrace is how long a registration outlives its last waiter: a
	// client that long-polls asks again at once, and keeping the
	// registration spares the database a delete and an insert per poll.
	watchGrace = 30 * time.Second
	// watchStale is when another process's registration counts as left
	// behind by a dead process (live ones are refreshed every watcherTend).
	watchStale = 10 * time.Minute
)

const (
	// operationWatchRegister registers watcher $2's interest in the
	// operations $1. The row lock FOR SHARE waits for a transaction that
	// has changed an operation to commit, and makes one that changes it
	// later wait for this registration: either the reader's next read sees
	// the change or the change notifies (schema 013).
	operationWatchRegister = `WITH op AS (
    SELECT id FROM operations WHERE id = ANY ($1::uuid[]) FOR SHARE
)
INSERT INTO operation_watches (operation_id, watcher, refreshed_at)
SELECT id, $2, now() FROM op
ON CONFLICT (operation_id, watcher) DO UPDATE SET refreshed_at = now()`

	// operationWatchRefresh keeps watcher $1's registrations of the
	// operations $2, which have waiters, from counting as stale.
	operationWatchRefresh = `UPDATE operation_watches SET refreshed_at = now()
WHERE watcher = $1 AND operation_id = ANY ($2::uuid[])`

	// operationWatchDrop removes watcher $1's registrations of the
	// operations $2 that nobody has waited on for $3 microseconds; one
	// registered again meanwhile is newer and stays.
	operationWatchDrop = `DELETE FROM operation_watches
WHERE watcher = $1 AND operation_id = ANY ($2::uuid[])
  AND refreshed_at < now() - $3::bigint * interval '1 microsecond'`

	// operationWatchDropStale removes registrations not refreshed for $1
	// microseconds: left behind by a process that died.
	operationWatchDropStale = `DELETE FROM operation_watches
WHERE refreshed_at < now() - $1::bigint * interval '1 microsecond'`
)

// Watcher tells readers waiting for an operation to change (a long-polling
// GET) that it has. It holds one connection per process in LISTEN and fans
// each notification out in memory, so a thousand waiters cost one Postgres
// connection, not a thousand, and nobody polls. It registers the
// operations it has waiters for in operation_watches, and only their
// changes notify: the dispatcher's transitions of operations nobody waits
// on never pay for a NOTIFY.
//
// A wake-up says only that the operation may have changed: the waiter
// reads it again and decides. Whenever the listening connection is
// (re)established every waiter is woken, since notifications sent while it
// was down are lost; a waiter must never wait on a stale belief.
type Watcher struct {
	pool *pgxpool.Pool
	log  *slog.Logger
	id   uuid.UUID // this process's registrations
	svc  startstop.Loop

	mu      sync.Mutex
	watches map[uuid.UUID]*watch
	n       int
}

// watch is the waiters of one operation in this process.
type watch struct {
	waiters   map[chan struct{}]struct{} // guarded by Watcher.mu
	idleSince time.Time                  // guarded by Watcher.mu; when the last waiter left

	register   sync.Mutex // held while registering, so waiters wait for it
	registered bool       // guarded by register
}

// NewWatcher returns a watcher that listens through one connection of
// pool once started.
func NewWatcher(pool *pgxpool.Pool, logger *slog.Logger) *Watcher {
	return &Watcher{
		pool:    pool,
		log:     cmp.Or(logger, slog.Default()).With("component", "operation_watcher"),
		id:      uuid.New(),
		watches: make(map[uuid.UUID]*watch),
	}
}

// Start listens in the background until Stop, reconnecting after failures,
// and tends its registrations.
func (w *Watcher) Start(ctx context.Context) error {
	return w.svc.Start(ctx, func(ctx context.Context) {
		var wg sync.WaitGroup
		wg.Add(1)
		go func() {
			defer wg.Done()
			w.tendLoop(ctx)
		}()
		defer wg.Wait()
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
// operation may have changed since Watch returned. Call stop when done. A
// reader reads the operation after Watch returns, and again after each
// value. It fails only when the registration cannot be written.
func (w *Watcher) Watch(ctx context.Context, id uuid.UUID) (changed <-chan struct{}, stop func(), err error) {
	ch := make(chan struct{}, 1)
	w.mu.Lock()
	e := w.watches[id]
	if e == nil {
		e = &watch{waiters: make(map[chan struct{}]struct{})}
		w.watches[id] = e
	}
	e.waiters[ch] = struct{}{}
	w.n++
	w.mu.Unlock()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			w.mu.Lock()
			defer w.mu.Unlock()
			delete(e.waiters, ch)
			if len(e.waiters) == 0 {
				e.idleSince = time.Now()
			}
			w.n--
		})
	}
	e.register.Lock()
	defer e.register.Unlock()
	if !e.registered {
		if _, err := w.pool.Exec(ctx, operationWatchRegister, []uuid.UUID{id}, w.id); err != nil {
			stop()
			return nil, nil, fmt.Errorf("watch operation %s: %w", id, err)
		}
		e.registered = true
	}
	return ch, stop, nil
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
	// Registrations may be gone (Postgres restarted: the table is
	// unlogged), and notifications were lost while nobody listened.
	if ids := w.ids(false); len(ids) > 0 {
		if _, err := w.pool.Exec(ctx, operationWatchRegister, ids, w.id); err != nil {
			return fmt.Errorf("register watched operations again: %w", err)
		}
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

// tendLoop refreshes the registrations that have waiters, drops those
// idle for watchGrace, and removes ones dead processes left behind.
func (w *Watcher) tendLoop(ctx context.Context) {
	startstop.Every(ctx, watcherTend, w.tend, func(ctx context.Context, err error) {
		w.log.WarnContext(ctx, "cannot tend operation watches", "err", err)
	})
}

func (w *Watcher) tend(ctx context.Context) error {
	if live := w.ids(true); len(live) > 0 {
		if _, err := w.pool.Exec(ctx, operationWatchRefresh, w.id, live); err != nil {
			return fmt.Errorf("refresh watches: %w", err)
		}
	}
	if idle := w.dropIdle(time.Now().Add(-watchGrace)); len(idle) > 0 {
		if _, err := w.pool.Exec(ctx, operationWatchDrop, w.id, idle, watchGrace.Microseconds()); err != nil {
			return fmt.Errorf("drop idle watches: %w", err)
		}
	}
	if _, err := w.pool.Exec(ctx, operationWatchDropStale, watchStale.Microseconds()); err != nil {
		return fmt.Errorf("drop stale watches: %w", err)
	}
	return nil
}

// ids lists the watched operations: only those with waiters when
// withWaiters, else all.
func (w *Watcher) ids(withWaiters bool) []uuid.UUID {
	w.mu.Lock()
	defer w.mu.Unlock()
	ids := make([]uuid.UUID, 0, len(w.watches))
	for id, e := range w.watches {
		if !withWaiters || len(e.waiters) > 0 {
			ids = append(ids, id)
		}
	}
	return ids
}

// dropIdle forgets the operations nobody has waited on since before
// cutoff and returns them. A later Watch of one registers it again.
func (w *Watcher) dropIdle(cutoff time.Time) []uuid.UUID {
	w.mu.Lock()
	defer w.mu.Unlock()
	var idle []uuid.UUID
	for id, e := range w.watches {
		if len(e.waiters) == 0 && e.idleSince.Before(cutoff) {
			delete(w.watches, id)
			idle = append(idle, id)
		}
	}
	return idle
}

// wake tells the waiters of operation id.
func (w *Watcher) wake(id uuid.UUID) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if e := w.watches[id]; e != nil {
		for ch := range e.waiters {
			signal(ch)
		}
	}
}

// wakeAll tells every waiter, after a time in which notifications may
// have been lost.
func (w *Watcher) wakeAll() {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, e := range w.watches {
		for ch := range e.waiters {
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
