package main

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivermigrate"
)

// orderArgs is River's job: order the operation's goods at the supplier.
type orderArgs struct {
	OperationID string `json:"operation_id"`
}

func (orderArgs) Kind() string { return "order" }

// orderWorker POSTs the order and marks the operation succeeded.
type orderWorker struct {
	river.WorkerDefaults[orderArgs]
	pool *pgxpool.Pool
	sup  *supplierClient
	done func(string)
}

func (w *orderWorker) Work(ctx context.Context, job *river.Job[orderArgs]) error {
	id := job.Args.OperationID
	orderID, err := w.sup.order(ctx, id)
	if err != nil {
		return err
	}
	if _, err := w.pool.Exec(ctx, markSucceeded, id, orderID); err != nil {
		return fmt.Errorf("mark %s succeeded: %w", id, err)
	}
	w.done(id)
	return nil
}

// riverPeer is River v0.51 with its pgx v5 driver, configured as its
// documentation shows, with as many workers as actledger's dispatcher has
// clients.
type riverPeer struct {
	supURL   string
	workers  int
	cooldown time.Duration
	pool     *pgxpool.Pool
	client   *river.Client[pgx.Tx]
}

func newRiver(supURL string, workers int, cooldown time.Duration) *riverPeer {
	return &riverPeer{supURL: supURL, workers: workers, cooldown: cooldown}
}

func (*riverPeer) Name() string { return "River" }

func (p *riverPeer) Start(ctx context.Context, pool *pgxpool.Pool, _ string, done func(string)) error {
	p.pool = pool
	drv := riverpgxv5.New(pool)
	mig, err := rivermigrate.New(drv, nil)
	if err != nil {
		return err
	}
	if _, err := mig.Migrate(ctx, rivermigrate.DirectionUp, nil); err != nil {
		return fmt.Errorf("river migrate: %w", err)
	}
	workers := river.NewWorkers()
	river.AddWorker(workers, &orderWorker{pool: pool, sup: newSupplierClient(p.supURL, p.workers), done: done})
	p.client, err = river.NewClient(drv, &river.Config{
		Queues:        map[string]river.QueueConfig{river.QueueDefault: {MaxWorkers: p.workers}},
		Workers:       workers,
		FetchCooldown: p.cooldown,
	})
	if err != nil {
		return err
	}
	return p.client.Start(ctx)
}

// Enqueue is the operation row and the River job in one transaction.
func (p *riverPeer) Enqueue(ctx context.Context, id string) error {
	tx, err := p.pool.Begin(ctx)
	if err != nil {
		return err
	}
	defer func() { _ = tx.Rollback(ctx) }()
	if _, err := tx.Exec(ctx, insertOperation, id); err != nil {
		return err
	}
	if _, err := p.client.InsertTx(ctx, tx, orderArgs{OperationID: id}, nil); err != nil {
		return err
	}
	return tx.Commit(ctx)
}

func (p *riverPeer) Stop(ctx context.Context) {
	if p.client != nil {
		_ = p.client.Stop(ctx)
	}
}
