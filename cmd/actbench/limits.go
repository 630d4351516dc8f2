package main

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/actledger/actledger/broker"
	"github.com/actledger/actledger/internal/resources"
	"github.com/actledger/actledger/ledger"
)

// limitSchema is the scratch schema of the two-INSERT limit: an
// operation-like row whose (tenant, action, key) is unique, as the ledger's
// dedup rule needs, and an outbox-like row with its unpublished index.
const limitSchema = `
CREATE TABLE ops (
    id         uuid PRIMARY KEY,
    tenant_id  uuid NOT NULL,
    action     text NOT NULL,
    key        text NOT NULL,
    params     jsonb NOT NULL,
    status     text NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now(),
    UNIQUE (tenant_id, action, key)
);
CREATE TABLE outbox (
    id           bigserial PRIMARY KEY,
    subject      text NOT NULL,
    msg_id       text NOT NULL,
    payload      bytea NOT NULL,
    created_at   timestamptz NOT NULL DEFAULT now(),
    published_at timestamptz
);
CREATE INDEX outbox_unpublished_idx ON outbox (id) WHERE published_at IS NULL;`

const (
	limitOpInsert = `INSERT INTO ops (id, tenant_id, action, key, params, status)
VALUES ($1, $2, $3, $4, $5, 'queued')`
	limitOutboxInsert = `INSERT INTO outbox (subject, msg_id, payload) VALUES ($1, $2, $3)`
)

// insertLimit is the first limit: how many two-INSERT transactions
// (BEGIN; INSERT op; INSERT outbox; COMMIT, synchronous_commit on) the
// server commits per second at a given client concurrency, in a scratch
// database.
type insertLimit struct {
	db *database
}

func newInsertLimit(ctx context.Context, adminURL string, clients int) (*insertLimit, error) {
	db, err := createDatabase(ctx, adminURL, databasePrefix+"limit_", int32(clients), false)
	if err != nil {
		return nil, err
	}
	if _, err := db.pool.Exec(ctx, limitSchema); err != nil {
		db.drop(ctx)
		return nil, fmt.Errorf("create the limit schema: %w", err)
	}
	return &insertLimit{db: db}, nil
}

func (l *insertLimit) close(ctx context.Context) { l.db.drop(ctx) }

// insertResult is one repetition of the two-INSERT limit.
type insertResult struct {
	Tx   int
	Rate float64 // transactions per second
	Lat  summary
	CPU  resources.Use
}

// run commits two-INSERT transactions from clients goroutines for dur,
// each with its own connection.
func (l *insertLimit) run(ctx context.Context, clients int, dur time.Duration) (insertResult, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	fail := &firstError{cancel: cancel}
	tenant := uuid.New()
	subject := "limit.ops." + benchProvider
	payload := []byte(`{"operation_id":"` + uuid.NewString() + `","version":1}`)
	cpu := resources.Start(databasePrefix)
	start := time.Now()
	deadline := start.Add(dur)
	perWorker := make([]latencies, clients)
	var wg sync.WaitGroup
	for i := range clients {
		wg.Go(func() {
			for t := time.Now(); t.Before(deadline); t = time.Now() {
				id := uuid.Must(uuid.NewV7())
				err := pgx.BeginFunc(ctx, l.db.pool, func(tx pgx.Tx) error {
					if _, err := tx.Exec(ctx, limitOpInsert, id, tenant, benchAction, id.String(), benchParams); err != nil {
						return err
					}
					_, err := tx.Exec(ctx, limitOutboxInsert, subject, ledger.DispatchMsgID(id, 1), payload)
					return err
				})
				if err != nil {
					fail.set(fmt.Errorf("two-INSERT transaction: %w", err))
					return
				}
				perWorker[i] = append(perWorker[i], time.Since(t))
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	var all latencies
	for _, l := range perWorker {
		all = append(all, l...)
	}
	return insertResult{Tx: len(all), Rate: perSecond(len(all), elapsed), Lat: all.summary(), CPU: cpu.Stop()}, fail.err
}

// publishLimit is the second limit: how fast JetStream accepts
// asynchronous publishes with Nats-Msg-Id into a file-storage stream, from
// a client set up as the relay's (actledger's broker connection, at most
// 4,096 acknowledgements pending).
type publishLimit struct {
	broker  *broker.Broker
	subject string
}

func newPublishLimit(ctx context.Context, natsURL string) (*publishLimit, error) {
	b, err := broker.Connect(ctx, broker.Config{
		URL: natsURL, Prefix: strings.ToUpper(uniqueName("BENCH")), Name: "actbench", Logger: quiet(),
	})
	if err != nil {
		return nil, fmt.Errorf("connect to NATS at %s (is nats-server -js running? set BENCH_NATS_URL): %w", natsURL, err)
	}
	// A subject of the ops stream (file storage, 2 min duplicate window)
	// that no consumer reads.
	return &publishLimit{broker: b, subject: b.DispatchSubject("limit")}, nil
}

func (l *publishLimit) close(ctx context.Context) {
	cleanup, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	if err := l.broker.DeleteStreams(cleanup); err != nil {
		logf("warning: %v", err)
	}
	l.broker.Close()
}

// run publishes n dispatch-like messages, each with its own Nats-Msg-Id,
// and returns messages per second from the first publish to the last
// acknowledgement.
func (l *publishLimit) run(ctx context.Context, n int) (float64, error) {
	js := l.broker.JetStream()
	futures := make([]jetstream.PubAckFuture, 0, n)
	start := time.Now()
	for range n {
		id := uuid.New()
		msg := &nats.Msg{Subject: l.subject, Data: []byte(`{"operation_id":"` + id.String() + `","version":1}`)}
		// A publish that finds 4,096 acknowledgements pending waits for
		// room; the default 200 ms wait fails the run on a moment of
		// contention, which is not what this limit measures.
		f, err := js.PublishMsgAsync(msg, jetstream.WithMsgID(ledger.DispatchMsgID(id, 1)), jetstream.WithStallWait(10*time.Second))
		if err != nil {
			return 0, fmt.Errorf("publish: %w", err)
		}
		futures = append(futures, f)
	}
	select {
	case <-js.PublishAsyncComplete():
	case <-time.After(30 * time.Second):
		return 0, errors.New("publish: acknowledgements missing after 30s")
	case <-ctx.Done():
		return 0, ctx.Err()
	}
	elapsed := time.Since(start)
	for _, f := range futures {
		select {
		case err := <-f.Err():
			return 0, fmt.Errorf("publish: %w", err)
		case ack := <-f.Ok():
			if ack.Duplicate {
				return 0, errors.New("publish: a unique message was taken for a duplicate")
			}
		}
	}
	return perSecond(n, elapsed), nil
}
