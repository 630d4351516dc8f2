package main

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/actledger/actledger/ledger"
)

// watchStream reports to t every dispatch message that reaches the ops
// stream from now on, as a subscriber sees it: an ordered consumer on the
// provider's subject, matched by the operation id in the payload. stop ends
// the watch.
func (p *pipeline) watchStream(ctx context.Context, t *tracker) (stop func(), err error) {
	cons, err := p.broker.JetStream().OrderedConsumer(ctx, p.broker.OpsStream(), jetstream.OrderedConsumerConfig{
		FilterSubjects: []string{p.broker.DispatchSubject(benchProvider)},
		DeliverPolicy:  jetstream.DeliverNewPolicy,
	})
	if err != nil {
		return nil, fmt.Errorf("watch the ops stream: %w", err)
	}
	cc, err := cons.Consume(func(msg jetstream.Msg) {
		at := time.Now()
		var d ledger.Dispatch
		if json.Unmarshal(msg.Data(), &d) == nil {
			t.saw(d.OperationID, at)
		}
	})
	if err != nil {
		return nil, fmt.Errorf("watch the ops stream: %w", err)
	}
	return cc.Stop, nil
}

// ledgerPollInterval is how often watchLedger asks Postgres which pending
// operations have settled; it bounds how late a success is seen. A poll
// that takes longer (many operations pending) waits four times its own
// duration before the next, so the watcher never takes more than a fifth
// of a connection's time from the system it measures.
const ledgerPollInterval = 2 * time.Millisecond

// operationsSettled are the operations among $1 that no longer wait for the
// dispatcher: succeeded, or stopped somewhere else.
const operationsSettled = `SELECT id, status FROM operations
WHERE id = ANY ($1) AND status NOT IN ('queued', 'dispatching', 'retry_wait', 'unknown')`

// watchLedger polls the ledger, on a connection of its own, for the
// operations t waits for and reports each as seen when its succeeded state
// is committed (at the start of the poll that found it; a poll every
// ledgerPollInterval). Any other settled state is a failure. stop ends the
// watch.
func (p *pipeline) watchLedger(ctx context.Context, t *tracker) (stop func(), err error) {
	conn, err := p.db.connect(ctx)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer conn.Close(context.WithoutCancel(ctx))
		for ctx.Err() == nil {
			start := time.Now()
			if ids := t.pending(); len(ids) > 0 {
				rows, _ := conn.Query(ctx, operationsSettled, ids)
				var id uuid.UUID
				var status string
				for rows.Next() {
					if rows.Scan(&id, &status) != nil {
						break
					}
					if status == string(ledger.StatusSucceeded) {
						t.saw(id, start)
					} else {
						t.fail(id, status)
					}
				}
				rows.Close()
				if err := rows.Err(); err != nil && ctx.Err() == nil {
					logf("warning: watching the ledger: %v", err)
				}
			}
			took := time.Since(start)
			_ = sleep(ctx, max(ledgerPollInterval-took, 4*took))
		}
	}()
	return func() { cancel(); <-done }, nil
}

const operationsOpen = `SELECT count(*) FROM operations
WHERE tenant_id = $1 AND status IN ('queued', 'dispatching', 'retry_wait', 'unknown', 'review')`

// waitSettled waits until no operation of the pipeline's tenant is open
// (every one has reached a final state) and returns the start of the poll
// that saw it (a poll every 10 ms).
func (p *pipeline) waitSettled(ctx context.Context, timeout time.Duration) (time.Time, error) {
	deadline := time.Now().Add(timeout)
	for {
		start := time.Now()
		var open int
		if err := p.db.pool.QueryRow(ctx, operationsOpen, p.tenantID).Scan(&open); err != nil {
			return time.Time{}, fmt.Errorf("count open operations: %w", err)
		}
		if open == 0 {
			return start, nil
		}
		if time.Now().After(deadline) {
			return time.Time{}, fmt.Errorf("%d operations still open after %s", open, timeout)
		}
		if err := sleep(ctx, 10*time.Millisecond); err != nil {
			return time.Time{}, err
		}
	}
}
