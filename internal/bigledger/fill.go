package bigledger

import (
	"context"
	_ "embed"
	"fmt"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"golang.org/x/sync/errgroup"
)

var (
	//go:embed fill_begin.sql
	fillBegin string
	//go:embed fill_chunk.sql
	fillChunk string
	//go:embed fill_end.sql
	fillEnd string
)

// FillVersion names the fill's SQL: a database filled by another version
// holds other rows, so a caller that keeps a filled database between runs
// refills it when the version it recorded differs.
var FillVersion = version(fillBegin + fillChunk + fillEnd)

// Defaults of FillConfig.
const (
	// DefaultOperations is the fill of a test: enough that a scan of the
	// history shows in a plan, written in seconds.
	DefaultOperations = 200_000
	// DefaultRange is the operations one transaction writes.
	DefaultRange = 250_000
	// DefaultSubject is the subject of the fill's dispatch messages.
	DefaultSubject = "TEST.dispatch.mock"
)

// FillConfig sizes a fill. Zero values are the defaults.
type FillConfig struct {
	// Operations is how many operations the fill writes, with about four
	// events each (DefaultOperations).
	Operations int64
	// Range is how many operations one transaction writes
	// (DefaultRange): a fill of millions commits as it goes, and its
	// progress can be told.
	Range int64
	// Workers write that many ranges at a time (default 1).
	Workers int
	// Subject is the subject of the outbox rows (DefaultSubject): a
	// relay that runs on the filled ledger publishes those not yet
	// published, so it must be one of that relay's streams' subjects.
	Subject string
	// Progress, if not nil, is called after each range with the
	// operations written so far.
	Progress func(written, total int64)
}

func (c FillConfig) withDefaults() FillConfig {
	if c.Operations <= 0 {
		c.Operations = DefaultOperations
	}
	if c.Range <= 0 {
		c.Range = DefaultRange
	}
	c.Workers = max(c.Workers, 1)
	if c.Subject == "" {
		c.Subject = DefaultSubject
	}
	return c
}

// Fill writes a ledger that has run for a while into pool's database,
// freshly migrated and empty (see fill_chunk.sql for what it holds), and
// analyzes it. It needs a superuser's connection (the fill writes
// operations and their events with session_replication_role = replica).
// Two fills of one size are alike row for row; a fill stopped half way
// leaves a database that only a new one should replace.
func Fill(ctx context.Context, pool *pgxpool.Pool, cfg FillConfig) error {
	cfg = cfg.withDefaults()
	n := strconv.FormatInt(cfg.Operations, 10)
	if err := fillTx(ctx, pool, fillBegin, n, "0", "0", cfg.Subject); err != nil {
		return fmt.Errorf("bigledger: fill tenants and approvals: %w", err)
	}
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(cfg.Workers)
	written := make(chan int64)
	done := make(chan struct{})
	go func() {
		defer close(done)
		var sum int64
		for w := range written {
			sum += w
			if cfg.Progress != nil {
				cfg.Progress(sum, cfg.Operations)
			}
		}
	}()
	for first := int64(0); first < cfg.Operations; first += cfg.Range {
		last := min(first+cfg.Range, cfg.Operations)
		g.Go(func() error {
			err := fillTx(gctx, pool, fillChunk, n, strconv.FormatInt(first, 10), strconv.FormatInt(last, 10), cfg.Subject)
			if err != nil {
				return fmt.Errorf("bigledger: fill operations %d to %d: %w", first, last, err)
			}
			written <- last - first
			return nil
		})
	}
	err := g.Wait()
	close(written)
	<-done
	if err != nil {
		return err
	}
	if err := fillTx(ctx, pool, fillEnd, n, "0", "0", cfg.Subject); err != nil {
		return fmt.Errorf("bigledger: fill evidence: %w", err)
	}
	return nil
}

// fillTx runs one part of the fill in a transaction with its settings.
func fillTx(ctx context.Context, pool *pgxpool.Pool, sql, operations, first, last, subject string) error {
	return pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SELECT set_config('bigledger.operations', $1, true), set_config('bigledger.first', $2, true),
       set_config('bigledger.last', $3, true), set_config('bigledger.subject', $4, true)`,
			operations, first, last, subject); err != nil {
			return err
		}
		// The simple protocol runs the whole file, many statements.
		_, err := tx.Exec(ctx, sql, pgx.QueryExecModeSimpleProtocol)
		return err
	})
}

// Analyze gathers the planner's statistics of a filled database with a
// sample of statisticsTarget (the server's default_statistics_target when
// zero) and reports how long it took. A test reads every row (10,000: the
// plans it judges must be the same in every run); a ledger of millions
// makes do with the server's sample, as autovacuum's ANALYZE does.
func Analyze(ctx context.Context, pool *pgxpool.Pool, statisticsTarget int) (time.Duration, error) {
	start := time.Now()
	conn, err := pool.Acquire(ctx)
	if err != nil {
		return 0, err
	}
	defer conn.Release()
	if statisticsTarget > 0 {
		if _, err := conn.Exec(ctx, "SELECT set_config('default_statistics_target', $1, false)", strconv.Itoa(statisticsTarget)); err != nil {
			return 0, err
		}
		defer func() {
			_, _ = conn.Exec(context.WithoutCancel(ctx), "RESET default_statistics_target")
		}()
	}
	if _, err := conn.Exec(ctx, "ANALYZE"); err != nil {
		return 0, fmt.Errorf("bigledger: analyze: %w", err)
	}
	return time.Since(start), nil
}
