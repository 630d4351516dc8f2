package metrics

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/actledger/actledger/internal/startstop"
)

// DefaultFoldInterval is FolderConfig.Interval's default: the deltas a
// second's writes append are a few rows per state, so folding every 15 s
// keeps the scrape's read short.
const DefaultFoldInterval = 15 * time.Second

// FolderConfig configures a Folder. Zero values mean the defaults.
type FolderConfig struct {
	// Interval is how often the deltas are folded. Default
	// DefaultFoldInterval.
	Interval time.Duration
	Logger   *slog.Logger
}

// Folder folds the operation count deltas (schema 011) into
// operation_counts on a timer. A scrape only reads (the folded counts plus
// the deltas not folded yet), so a request never makes the database
// write: before, each scrape ran the fold, and whoever could reach
// /metrics could make actledger write. Several processes may fold at
// once: DELETE … RETURNING folds each delta exactly once.
type Folder struct {
	pool *pgxpool.Pool
	cfg  FolderConfig
	log  *slog.Logger
	loop startstop.Loop
}

var _ startstop.Service = (*Folder)(nil)

// NewFolder returns a Folder over pool; it folds nothing until Start.
func NewFolder(pool *pgxpool.Pool, cfg FolderConfig) (*Folder, error) {
	if cfg.Interval < 0 {
		return nil, fmt.Errorf("metrics: FolderConfig.Interval %s must not be negative", cfg.Interval)
	}
	cfg.Interval = cmp.Or(cfg.Interval, DefaultFoldInterval)
	return &Folder{pool: pool, cfg: cfg, log: cmp.Or(cfg.Logger, slog.Default()).With("component", "metrics")}, nil
}

// Start folds every Interval until Stop.
func (f *Folder) Start(ctx context.Context) error {
	return f.loop.Start(ctx, func(ctx context.Context) {
		startstop.Every(ctx, f.cfg.Interval, f.Fold, func(ctx context.Context, err error) {
			// The scrape's read is right without the fold; it only costs
			// more until the next one.
			f.log.WarnContext(ctx, "fold operation counts", "err", err)
		})
	})
}

// Stop stops folding and waits; safe to call more than once.
func (f *Folder) Stop() { f.loop.Stop() }

// Fold moves the deltas appended so far into operation_counts, once.
func (f *Folder) Fold(ctx context.Context) error {
	if _, err := f.pool.Exec(ctx, operationCountsFold); err != nil {
		return fmt.Errorf("metrics: fold operation counts: %w", err)
	}
	return nil
}
