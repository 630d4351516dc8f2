package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/google/uuid"
)

// client is one load-generating agent: it POSTs fresh operations, each with
// a new key, under its own approval.
type client struct {
	p        *pipeline
	approval uuid.UUID
	prefix   string // makes its keys unique in the database
	n        int
}

// clients makes n clients, each with its own approval.
func (p *pipeline) clients(ctx context.Context, n int) ([]*client, error) {
	approvals, err := p.approvals(ctx, n)
	if err != nil {
		return nil, err
	}
	cs := make([]*client, n)
	for i := range cs {
		cs[i] = &client{p: p, approval: approvals[i], prefix: fmt.Sprintf("c%d-", i)}
	}
	return cs, nil
}

// enqueue sends POST /v1/operations for a new operation and returns its
// id. Anything but 201 Created is an error: the benchmark measures
// accepted work only.
func (c *client) enqueue(ctx context.Context) (uuid.UUID, error) {
	c.n++
	body := fmt.Appendf(nil, `{"action":%q,"key":"%s%d","params":%s,"approval_id":%q}`,
		benchAction, c.prefix, c.n, benchParams, c.approval)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.p.url+"/v1/operations", bytes.NewReader(body))
	if err != nil {
		return uuid.Nil, err
	}
	req.Header.Set("Authorization", "Bearer "+c.p.agent)
	req.Header.Set("Content-Type", "application/json")
	res, err := c.p.client.Do(req)
	if err != nil {
		return uuid.Nil, fmt.Errorf("POST /v1/operations: %w", err)
	}
	raw, err := io.ReadAll(res.Body)
	res.Body.Close()
	if err != nil {
		return uuid.Nil, fmt.Errorf("POST /v1/operations: read answer: %w", err)
	}
	if res.StatusCode != http.StatusCreated {
		return uuid.Nil, fmt.Errorf("POST /v1/operations: %s: %s", res.Status, raw)
	}
	var op struct {
		ID uuid.UUID `json:"id"`
	}
	if err := json.Unmarshal(raw, &op); err != nil {
		return uuid.Nil, fmt.Errorf("POST /v1/operations: answer: %w", err)
	}
	return op.ID, nil
}

// firstError keeps the first error of concurrent workers and cancels the
// rest.
type firstError struct {
	once   sync.Once
	err    error
	cancel context.CancelFunc
}

func (f *firstError) set(err error) {
	f.once.Do(func() { f.err = err; f.cancel() })
}

// closedLoopResult is what a closed-loop run measured.
type closedLoopResult struct {
	Ops       int
	Elapsed   time.Duration // from the start to the last answer
	Latencies latencies
}

// loop bounds a closed-loop run and may hold its clients back.
type loop struct {
	Duration  time.Duration // 0: no time limit
	PerClient int           // requests per client; 0: no count limit
	// Hold, when set, is called before each request and returns once the
	// client may send it.
	Hold func(ctx context.Context) error
}

// closedLoop runs every client at once; each sends its next request as
// soon as the previous one is answered, until l's limits are reached.
func closedLoop(ctx context.Context, clients []*client, l loop) (closedLoopResult, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	fail := &firstError{cancel: cancel}
	start := time.Now()
	var deadline time.Time
	if l.Duration > 0 {
		deadline = start.Add(l.Duration)
	}
	perWorker := make([]latencies, len(clients))
	var wg sync.WaitGroup
	for i, c := range clients {
		wg.Go(func() {
			for n := 0; l.PerClient == 0 || n < l.PerClient; n++ {
				if l.Hold != nil {
					if err := l.Hold(ctx); err != nil {
						fail.set(err)
						return
					}
				}
				t := time.Now()
				if !deadline.IsZero() && !t.Before(deadline) {
					return
				}
				if _, err := c.enqueue(ctx); err != nil {
					fail.set(err)
					return
				}
				perWorker[i] = append(perWorker[i], time.Since(t))
			}
		})
	}
	wg.Wait()
	res := closedLoopResult{Elapsed: time.Since(start)}
	for _, l := range perWorker {
		res.Latencies = append(res.Latencies, l...)
	}
	res.Ops = len(res.Latencies)
	return res, fail.err
}

// openResult is what an open-loop run did.
type openResult struct {
	Sent int // operations accepted (201)
	// Abandoned operations were never sent because, when their turn came,
	// the system was already over the open loop's give-up bound behind the
	// offered rate (see openLoop).
	Abandoned int
}

// openLoop offers rate operations per second for dur. Operation i is due at
// start + i/rate whatever became of the ones before it (an open loop, as
// independent agents behave), and goes to the first free client; sent is
// called with each operation and its due time, from which every latency
// counts, so a queue in front of a busy system shows as latency instead of
// lowering the offered rate.
//
// An overloaded system would make the run last as long as its backlog
// takes to clear, so an operation is abandoned (not sent, counted) when, at
// its turn, it is more than giveUp late or more than rate × giveUp
// operations are in flight (pending: sent and not seen yet).
func openLoop(ctx context.Context, clients []*client, rate float64, dur, giveUp time.Duration,
	sent func(id uuid.UUID, due time.Time), pending func() int) (openResult, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	fail := &firstError{cancel: cancel}
	total := int(rate * dur.Seconds())
	interval := time.Duration(float64(time.Second) / rate)
	maxPending := int(rate * giveUp.Seconds())
	due := make(chan time.Time, total)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var res openResult
	for _, c := range clients {
		wg.Go(func() {
			for at := range due {
				if time.Since(at) > giveUp || pending() > maxPending {
					mu.Lock()
					res.Abandoned++
					mu.Unlock()
					continue
				}
				id, err := c.enqueue(ctx)
				if err != nil {
					fail.set(err)
					return
				}
				sent(id, at)
				mu.Lock()
				res.Sent++
				mu.Unlock()
			}
		})
	}
	start := time.Now()
	timer := time.NewTimer(0)
	defer timer.Stop()
schedule:
	for i := range total {
		at := start.Add(time.Duration(i) * interval)
		if wait := time.Until(at); wait > 0 {
			timer.Reset(wait)
			select {
			case <-timer.C:
			case <-ctx.Done():
				break schedule
			}
		}
		due <- at
	}
	close(due)
	wg.Wait()
	return res, fail.err
}

// tracker matches the operations the load generator sent with the moment a
// watcher saw each reach a point (published on the stream, succeeded in the
// ledger). Either may come first: a message can be on the stream before its
// HTTP answer is read.
type tracker struct {
	mu     sync.Mutex
	due    map[uuid.UUID]time.Time // sent, not seen yet
	seen   map[uuid.UUID]time.Time // seen, answer not read yet
	lat    latencies
	failed []string // operations that ended otherwise than expected
}

func newTracker() *tracker {
	return &tracker{due: make(map[uuid.UUID]time.Time), seen: make(map[uuid.UUID]time.Time)}
}

// sent records that id was due at due.
func (t *tracker) sent(id uuid.UUID, due time.Time) {
	t.pair(id, due, t.due, t.seen, func(seen time.Time) time.Duration { return seen.Sub(due) })
}

// saw records that id reached the point at at.
func (t *tracker) saw(id uuid.UUID, at time.Time) {
	t.pair(id, at, t.seen, t.due, func(due time.Time) time.Duration { return at.Sub(due) })
}

// pair matches one end of an operation's measurement with the other: if
// the other end is already in others, the latency is recorded; otherwise
// this end waits in mine. The two ends may arrive in either order.
func (t *tracker) pair(id uuid.UUID, at time.Time, mine, others map[uuid.UUID]time.Time, latency func(other time.Time) time.Duration) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if other, ok := others[id]; ok {
		delete(others, id)
		t.lat = append(t.lat, latency(other))
		return
	}
	mine[id] = at
}

// fail records that id ended in a state it should not have.
func (t *tracker) fail(id uuid.UUID, status string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	delete(t.due, id)
	t.failed = append(t.failed, id.String()+" is "+status)
}

// pending lists the sent operations not seen yet.
func (t *tracker) pending() []uuid.UUID {
	t.mu.Lock()
	defer t.mu.Unlock()
	ids := make([]uuid.UUID, 0, len(t.due))
	for id := range t.due {
		ids = append(ids, id)
	}
	return ids
}

// inFlight counts the sent operations not seen yet.
func (t *tracker) inFlight() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.due)
}

// wait returns the latencies once n operations were seen, or an error
// after timeout or when one failed.
func (t *tracker) wait(ctx context.Context, n int, timeout time.Duration) (latencies, error) {
	deadline := time.Now().Add(timeout)
	for {
		t.mu.Lock()
		got, failed := len(t.lat), t.failed
		t.mu.Unlock()
		switch {
		case len(failed) > 0:
			return nil, fmt.Errorf("%d operations did not succeed, e.g. %s", len(failed), failed[0])
		case got >= n:
			t.mu.Lock()
			defer t.mu.Unlock()
			return slices.Clone(t.lat), nil
		case time.Now().After(deadline):
			return nil, fmt.Errorf("only %d of %d operations got there within %s", got, n, timeout)
		}
		if err := sleep(ctx, 5*time.Millisecond); err != nil {
			return nil, err
		}
	}
}

// sleep waits d or until ctx ends.
func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
