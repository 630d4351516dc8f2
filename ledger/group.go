package ledger

import (
	"bytes"
	"context"
	"slices"
	"sync"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

const (
	// groupMax bounds how many callers share one round trip.
	groupMax = 64
	// groupInFlight is how many shared batches run at once. Two keep
	// Postgres working while one batch waits for its commit's WAL flush;
	// more split the pending writes into smaller batches, and every batch
	// costs its statements whatever its size (docs/benchmarks.md, "What
	// changed, and what each change bought": two shared batches in flight
	// instead of four).
	groupInFlight = 2
)

// groupCommit runs the writes of concurrent callers in shared round trips:
// everything that arrives while one batch is in flight goes out as the next
// pgx.Batch, which Postgres runs as one implicit transaction with one
// commit. Commits are what a database machine has least of (each waits for
// a WAL flush and wakes processes); workers that commit one operation at a
// time spend most of their time waiting for them.
//
// Writes of one writeSet (e.g. every operation transition of the batch)
// go out as one set-based statement rather than one statement each: the
// database plans, starts and finishes one statement for all of them, and
// its statement-level triggers run once.
//
// Each caller's statements stay atomic: if a shared batch fails, every
// caller's statements run again on their own, so one caller's error never
// becomes another's. No goroutine outlives the work: a caller that finds
// fewer than groupInFlight drains running starts one, and a drain ends when
// nothing is pending.
type groupCommit struct {
	pool *pgxpool.Pool

	mu      sync.Mutex
	pending []*groupWrite
	running int // drains sending batches, at most groupInFlight
}

// groupWrite is one caller's share of a batch.
type groupWrite struct {
	ctx context.Context
	// key orders the writes of a batch (an operation id), so two batches
	// that touch the same rows lock them in the same order and cannot
	// deadlock.
	key uuid.UUID
	// queue adds the caller's statements to b with callbacks that keep
	// their results; it may run twice (a failed shared batch is retried
	// alone), so the callbacks overwrite rather than accumulate.
	queue func(b *pgx.Batch)
	// set, instead of queue, makes the write item one of the set's items:
	// the set queues one statement for all its items in the batch.
	set  *writeSet
	item any
	done chan error
}

// writeSet is a kind of write that many callers' writes share one
// statement for.
type writeSet struct {
	// queue adds one statement for items (in the batch's key order) to b,
	// with a callback that gives each item its own result; like
	// groupWrite.queue it may run again for an item alone. An error (the
	// statement and its arguments disagree) fails the batch unsent.
	queue func(b *pgx.Batch, items []any) error
}

// do queues the caller's statements and returns when they have committed
// (or failed); the error is the batch's, as pgx.BatchResults.Close gives it.
func (g *groupCommit) do(ctx context.Context, key uuid.UUID, queue func(b *pgx.Batch)) error {
	return g.add(&groupWrite{ctx: ctx, key: key, queue: queue, done: make(chan error, 1)})
}

// doSet is do for a write that is item of set.
func (g *groupCommit) doSet(ctx context.Context, key uuid.UUID, set *writeSet, item any) error {
	return g.add(&groupWrite{ctx: ctx, key: key, set: set, item: item, done: make(chan error, 1)})
}

func (g *groupCommit) add(w *groupWrite) error {
	g.mu.Lock()
	g.pending = append(g.pending, w)
	start := g.running < groupInFlight
	if start {
		g.running++
	}
	g.mu.Unlock()
	if start {
		go g.drain()
	}
	// Once queued, the write is waited for even if ctx ends: the caller
	// must learn whether it committed.
	return <-w.done
}

// drain sends batches until nothing is pending.
func (g *groupCommit) drain() {
	for {
		g.mu.Lock()
		n := min(len(g.pending), groupMax)
		if n == 0 {
			g.running--
			g.mu.Unlock()
			return
		}
		batch := slices.Clone(g.pending[:n])
		g.pending = slices.Delete(g.pending, 0, n)
		g.mu.Unlock()
		g.run(batch)
	}
}

func (g *groupCommit) run(batch []*groupWrite) {
	slices.SortFunc(batch, func(a, b *groupWrite) int { return bytes.Compare(a.key[:], b.key[:]) })
	ctx := context.WithoutCancel(batch[0].ctx)
	err := g.send(ctx, batch)
	if err != nil && len(batch) > 1 && !Unavailable(err) {
		// The whole shared transaction rolled back for one caller's
		// error: run each caller's statements alone to give each its own.
		for _, w := range batch {
			w.done <- g.send(context.WithoutCancel(w.ctx), []*groupWrite{w})
		}
		return
	}
	for _, w := range batch {
		w.done <- err
	}
}

func (g *groupCommit) send(ctx context.Context, batch []*groupWrite) error {
	b := &pgx.Batch{}
	var (
		sets  []*writeSet
		items [][]any
	)
	for _, w := range batch {
		if w.set == nil {
			w.queue(b)
			continue
		}
		i := slices.Index(sets, w.set)
		if i < 0 {
			i = len(sets)
			sets, items = append(sets, w.set), append(items, nil)
		}
		items[i] = append(items[i], w.item)
	}
	for i, set := range sets {
		if err := set.queue(b, items[i]); err != nil {
			return err
		}
	}
	return g.pool.SendBatch(ctx, b).Close()
}
