package main

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/ThreeDotsLabs/watermill"
	wmnats "github.com/ThreeDotsLabs/watermill-nats/v2/pkg/jetstream"
	wmsql "github.com/ThreeDotsLabs/watermill-sql/v4/pkg/sql"
	"github.com/ThreeDotsLabs/watermill/components/forwarder"
	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// watermillPeer is Watermill's transactional outbox: the operation row and
// an enveloped message in Postgres in one transaction (watermill-sql
// publisher wrapped by the forwarder publisher); the forwarder moves each
// message to a JetStream stream (watermill-nats); 16 subscriptions on one
// durable consumer POST the order and mark the operation succeeded.
type watermillPeer struct {
	supURL, natsURL string
	workers         int

	pool    *pgxpool.Pool
	nc      *nats.Conn
	js      jetstream.JetStream
	topic   string // the JetStream stream and subject, unique per run
	fwdSQL  string // the Postgres topic the forwarder reads
	schema  wmsql.SchemaAdapter
	fwd     *forwarder.Forwarder
	sub     *wmnats.Subscriber
	pub     *wmnats.Publisher
	sqlSub  *wmsql.Subscriber
	cancel  context.CancelFunc
	wg      sync.WaitGroup
	logger  watermill.LoggerAdapter
	fwdDone chan struct{}
}

func newWatermill(supURL, natsURL string, workers int) *watermillPeer {
	return &watermillPeer{supURL: supURL, natsURL: natsURL, workers: workers}
}

func (*watermillPeer) Name() string { return "Watermill" }

func (p *watermillPeer) Start(ctx context.Context, pool *pgxpool.Pool, _ string, done func(string)) error {
	p.pool = pool
	p.logger = watermill.NopLogger{}
	suffix := time.Now().UnixNano()
	p.topic = fmt.Sprintf("PEERS_WM_%d", suffix)
	p.fwdSQL = "outbox"
	p.schema = wmsql.DefaultPostgreSQLSchema{}

	var err error
	if p.nc, err = nats.Connect(p.natsURL); err != nil {
		return fmt.Errorf("nats: %w", err)
	}
	if p.js, err = jetstream.New(p.nc); err != nil {
		return err
	}
	// A work-queue stream, as watermill-nats' GroupedConsumer expects.
	if _, err := p.js.CreateStream(ctx, jetstream.StreamConfig{
		Name: p.topic, Subjects: []string{p.topic}, Retention: jetstream.WorkQueuePolicy, Storage: jetstream.FileStorage,
	}); err != nil {
		return fmt.Errorf("create stream %s: %w", p.topic, err)
	}
	if p.pub, err = wmnats.NewPublisher(wmnats.PublisherConfig{Conn: p.nc, Logger: p.logger}); err != nil {
		return err
	}
	p.sqlSub, err = wmsql.NewSubscriber(wmsql.BeginnerFromPgx(pool), wmsql.SubscriberConfig{
		SchemaAdapter:    p.schema,
		OffsetsAdapter:   wmsql.DefaultPostgreSQLOffsetsAdapter{},
		InitializeSchema: true,
		// The default is 1 s between polls of an empty table; 10 ms keeps
		// the outbox's latency comparable to a relay that is woken.
		PollInterval: 10 * time.Millisecond,
	}, p.logger)
	if err != nil {
		return err
	}
	if err := p.sqlSub.SubscribeInitialize(p.fwdSQL); err != nil {
		return fmt.Errorf("outbox schema: %w", err)
	}
	if p.fwd, err = forwarder.NewForwarder(p.sqlSub, p.pub, p.logger, forwarder.Config{ForwarderTopic: p.fwdSQL}); err != nil {
		return err
	}
	runCtx, cancel := context.WithCancel(context.Background())
	p.cancel = cancel
	p.fwdDone = make(chan struct{})
	go func() {
		defer close(p.fwdDone)
		if err := p.fwd.Run(runCtx); err != nil {
			logf("watermill forwarder: %v", err)
		}
	}()
	select {
	case <-p.fwd.Running():
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(30 * time.Second):
		return errors.New("forwarder did not start")
	}

	if p.sub, err = wmnats.NewSubscriber(wmnats.SubscriberConfig{
		Conn: p.nc, Logger: p.logger, ResourceInitializer: wmnats.GroupedConsumer("orders"),
	}); err != nil {
		return err
	}
	sup := newSupplierClient(p.supURL, p.workers)
	for range p.workers {
		msgs, err := p.sub.Subscribe(runCtx, p.topic)
		if err != nil {
			return fmt.Errorf("subscribe: %w", err)
		}
		p.wg.Add(1)
		go func() {
			defer p.wg.Done()
			for m := range msgs {
				id := string(m.Payload)
				orderID, err := sup.order(m.Context(), id)
				if err == nil {
					_, err = pool.Exec(m.Context(), markSucceeded, id, orderID)
				}
				if err != nil {
					logf("watermill worker %s: %v", id, err)
					m.Nack()
					continue
				}
				done(id)
				m.Ack()
			}
		}()
	}
	return nil
}

// Enqueue is the operation row and the enveloped outbox message in one
// transaction.
func (p *watermillPeer) Enqueue(ctx context.Context, id string) error {
	tx, err := p.pool.Begin(ctx)
	if err != nil {
		return err
	}
	defer func() { _ = tx.Rollback(ctx) }()
	if _, err := tx.Exec(ctx, insertOperation, id); err != nil {
		return err
	}
	sqlPub, err := wmsql.NewPublisher(wmsql.TxFromPgx(tx), wmsql.PublisherConfig{SchemaAdapter: p.schema}, p.logger)
	if err != nil {
		return err
	}
	pub := forwarder.NewPublisher(sqlPub, forwarder.PublisherConfig{ForwarderTopic: p.fwdSQL})
	if err := pub.Publish(p.topic, message.NewMessage(watermill.NewUUID(), []byte(id))); err != nil {
		return fmt.Errorf("outbox publish: %w", err)
	}
	return tx.Commit(ctx)
}

// Stop ends the forwarder and the subscriptions and deletes the stream.
func (p *watermillPeer) Stop(ctx context.Context) {
	if p.cancel != nil {
		p.cancel()
	}
	if p.fwd != nil {
		_ = p.fwd.Close()
		<-p.fwdDone
	}
	if p.sub != nil {
		_ = p.sub.Close()
	}
	p.wg.Wait()
	if p.js != nil {
		if err := p.js.DeleteStream(ctx, p.topic); err != nil {
			logf("delete stream %s: %v", p.topic, err)
		}
	}
	if p.nc != nil {
		p.nc.Close()
	}
}
