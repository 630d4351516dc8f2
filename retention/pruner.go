package retention

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/actledger/actledger/internal/startstop"
	"github.com/actledger/actledger/ledger"
)

// Defaults of Config.
const (
	// DefaultInterval is how often a serving process prunes.
	DefaultInterval = time.Hour
	// DefaultProgressEvery is how often a long run logs its progress.
	DefaultProgressEvery = 10 * time.Second
)

// lockID is the advisory lock that lets one pruner run at a time
// ("alprune" in ASCII).
const lockID = 0x616c7072756e65

// ErrBusy is Run's answer while another pruner (in this or another
// process) holds the lock: nothing was done.
var ErrBusy = errors.New("retention: another prune is running")

// Config configures a Pruner.
type Config struct {
	// Store is the ledger pruned. Required.
	Store *ledger.Store
	// Pool is the ledger's database, on which the pruner takes its
	// advisory lock. Required.
	Pool *pgxpool.Pool
	// OlderThan is the retention period: terminal operations unchanged
	// for longer go. Required, positive.
	OlderThan time.Duration
	// Archive is the directory each run writes its archive file to, or
	// Stdout. Required unless every run is a dry run.
	Archive string
	// Stdout is where Archive Stdout writes; default os.Stdout.
	Stdout io.Writer
	// StatementRecords is how long the records (the findings) of a
	// statement run that is not its provider's last are kept; default
	// ledger.DefaultStatementRecordsKept, and never longer than
	// OlderThan, after which the run itself goes.
	StatementRecords time.Duration
	// KeyTombstones is how long the key tombstone of a pruned operation
	// (schema 041) is kept after its prune: while it is, a create under
	// its key takes its external key (same params) or is refused (other
	// params). It must be at least the longest idempotency.retention of
	// the providers file (provider.Registry.LongestIdempotencyRetention),
	// as long as a supplier may still answer the key with its first
	// effect; the wiring (app, actledger prune) gives that. Default, and
	// never less than, OlderThan.
	KeyTombstones time.Duration
	// Interval is how often Start prunes; default DefaultInterval.
	Interval time.Duration
	// Batch is the most operations (and evidence rows) per transaction;
	// default ledger.DefaultPruneBatch.
	Batch int
	// ProgressEvery is how often a run logs its progress; default
	// DefaultProgressEvery.
	ProgressEvery time.Duration
	// Now is the clock the cutoff is taken from; default time.Now.
	Now    func() time.Time
	Logger *slog.Logger
}

// Pruner archives, then deletes, what the ledger keeps past its
// retention period.
type Pruner struct {
	cfg  Config
	loop startstop.Loop
}

// New validates cfg, fills its defaults and returns a Pruner.
func New(cfg Config) (*Pruner, error) {
	switch {
	case cfg.Store == nil || cfg.Pool == nil:
		return nil, errors.New("retention: Config.Store and Config.Pool are required")
	case cfg.OlderThan <= 0:
		return nil, fmt.Errorf("retention: Config.OlderThan %s is not a positive duration", cfg.OlderThan)
	case cfg.Archive != "" && cfg.Archive != Stdout:
		info, err := os.Stat(cfg.Archive)
		if err != nil {
			return nil, fmt.Errorf("retention: archive directory: %w", err)
		}
		if !info.IsDir() {
			return nil, fmt.Errorf("retention: archive %s is not a directory", cfg.Archive)
		}
	}
	cfg.Stdout = cmp.Or[io.Writer](cfg.Stdout, os.Stdout)
	cfg.StatementRecords = min(cmp.Or(cfg.StatementRecords, ledger.DefaultStatementRecordsKept), cfg.OlderThan)
	cfg.KeyTombstones = max(cfg.KeyTombstones, cfg.OlderThan)
	cfg.Interval = cmp.Or(cfg.Interval, DefaultInterval)
	cfg.Batch = cmp.Or(cfg.Batch, ledger.DefaultPruneBatch)
	cfg.ProgressEvery = cmp.Or(cfg.ProgressEvery, DefaultProgressEvery)
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	return &Pruner{cfg: cfg}, nil
}

// Summary is what one run deleted (or, in a dry run, would have).
type Summary struct {
	DryRun bool
	Cutoff time.Time
	// Operations by the state they ended in, and their rows.
	Operations   int64
	ByStatus     map[ledger.Status]int64
	Events       int64
	StaleResults int64
	KeyConflicts int64
	// WebhookEvents and OutboxMessages went by age alone.
	WebhookEvents  int64
	OutboxMessages int64
	// StatementRuns went by age, with their records; StatementRecords
	// counts every record that went, with its run or alone (after
	// Config.StatementRecords). A provider's last finished run stays.
	StatementRuns    int64
	StatementRecords int64
	// KeyTombstones went after Config.KeyTombstones; the tombstones the
	// run's prunes left are not counted.
	KeyTombstones int64
	// Archive is the file written ("-": standard output; empty: none,
	// nothing was pruned or it was a dry run).
	Archive  string
	Duration time.Duration
}

// logAttrs are s as log attributes.
func (s Summary) logAttrs() []any {
	attrs := []any{
		"dry_run", s.DryRun, "cutoff", s.Cutoff.UTC().Format(time.RFC3339), "operations", s.Operations,
		"events", s.Events, "stale_results", s.StaleResults, "key_conflicts", s.KeyConflicts,
		"webhook_events", s.WebhookEvents, "outbox_messages", s.OutboxMessages,
		"statement_runs", s.StatementRuns, "statement_records", s.StatementRecords, "key_tombstones", s.KeyTombstones,
		"archive", s.Archive, "duration", s.Duration.Round(time.Millisecond).String(),
	}
	for _, st := range slices.Sorted(maps.Keys(s.ByStatus)) {
		attrs = append(attrs, "operations_"+string(st), s.ByStatus[st])
	}
	if secs := s.Duration.Seconds(); secs > 0 {
		attrs = append(attrs, "operations_per_second", int64(float64(s.Operations)/secs))
	}
	return attrs
}

// Run prunes once: it takes the advisory lock (ErrBusy when another
// pruner holds it), then, tenant by tenant, archives and deletes the
// terminal operations older than the retention period in batches, and
// then the old published outbox messages and applied webhook events. A
// dry run counts what would go and deletes and archives nothing. A batch
// whose archive fails rolls back, and the run stops with the error: what
// earlier batches deleted is in the archive.
func (p *Pruner) Run(ctx context.Context, dryRun bool) (Summary, error) {
	conn, err := p.cfg.Pool.Acquire(ctx)
	if err != nil {
		return Summary{}, fmt.Errorf("retention: acquire a connection for the lock: %w", err)
	}
	defer conn.Release()
	var locked bool
	if err := conn.QueryRow(ctx, `SELECT pg_try_advisory_lock($1)`, int64(lockID)).Scan(&locked); err != nil {
		return Summary{}, fmt.Errorf("retention: take the lock: %w", err)
	}
	if !locked {
		return Summary{}, ErrBusy
	}
	defer func() {
		_, _ = conn.Exec(context.WithoutCancel(ctx), `SELECT pg_advisory_unlock($1)`, int64(lockID))
	}()

	start := p.cfg.Now()
	s := Summary{DryRun: dryRun, Cutoff: start.Add(-p.cfg.OlderThan).UTC(), ByStatus: map[ledger.Status]int64{}}
	if !dryRun && p.cfg.Archive == "" {
		return s, errors.New("retention: no archive configured: a prune that deletes needs one (a directory, or - for standard output)")
	}
	a := &archive{}
	switch {
	case dryRun:
	case p.cfg.Archive == Stdout:
		a.out, a.name = p.cfg.Stdout, Stdout
	default:
		a.dir = p.cfg.Archive
	}
	name := fileName(s.Cutoff, start)
	clock := time.Now()
	lastLog := clock
	progress := func() {
		if time.Since(lastLog) >= p.cfg.ProgressEvery {
			lastLog = time.Now()
			s.Duration = time.Since(clock)
			p.cfg.Logger.InfoContext(ctx, "prune progress", s.logAttrs()...)
		}
	}
	err = p.pruneOperations(ctx, &s, dryRun, func(ctx context.Context, hs []ledger.History) error {
		return a.write(ctx, hs, name)
	}, progress)
	if cerr := a.close(); err == nil && cerr != nil {
		err = fmt.Errorf("retention: close archive: %w", cerr)
	}
	s.Archive = a.name
	if err == nil {
		err = p.pruneRows(ctx, &s, dryRun, progress)
	}
	if err == nil {
		err = p.pruneStatements(ctx, &s, start, dryRun, progress)
	}
	if err == nil {
		err = p.pruneKeyTombstones(ctx, &s, start, dryRun, progress)
	}
	s.Duration = time.Since(clock)
	if err != nil {
		level := slog.LevelError
		if ctx.Err() != nil {
			level = slog.LevelInfo // stopped with its process: the batch in flight rolled back
		}
		p.cfg.Logger.Log(ctx, level, "prune stopped", append(s.logAttrs(), "error", err)...)
		return s, err
	}
	p.cfg.Logger.InfoContext(ctx, "prune done", s.logAttrs()...)
	return s, nil
}

// pruneOperations runs the operation batches of every tenant.
func (p *Pruner) pruneOperations(ctx context.Context, s *Summary, dryRun bool, archive func(context.Context, []ledger.History) error, progress func()) error {
	tenants, err := p.cfg.Store.TenantIDs(ctx)
	if err != nil {
		return err
	}
	for _, tenant := range tenants {
		b := ledger.PruneBatch{Tenant: tenant, Cutoff: s.Cutoff, Limit: p.cfg.Batch, DryRun: dryRun}
		for {
			got, err := p.cfg.Store.PruneOperations(ctx, b, archive)
			if err != nil {
				return fmt.Errorf("retention: tenant %s: %w", tenant, err)
			}
			s.Operations += got.Operations
			s.Events += got.Events
			s.StaleResults += got.StaleResults
			s.KeyConflicts += got.KeyConflicts
			for st, n := range got.ByStatus {
				s.ByStatus[st] += n
			}
			progress()
			if got.Done {
				break
			}
			b.After = got.Next
		}
	}
	return nil
}

// pruneRows walks the tables pruned by age alone.
func (p *Pruner) pruneRows(ctx context.Context, s *Summary, dryRun bool, progress func()) error {
	for _, t := range []struct {
		table ledger.PruneTable
		n     *int64
	}{{ledger.PruneWebhookEvents, &s.WebhookEvents}, {ledger.PruneOutbox, &s.OutboxMessages}} {
		var after int64
		for {
			got, err := p.cfg.Store.PruneRows(ctx, t.table, s.Cutoff, after, p.cfg.Batch, dryRun)
			if err != nil {
				return fmt.Errorf("retention: %w", err)
			}
			*t.n += got.Deleted
			progress()
			if got.Done {
				break
			}
			after = got.Next
		}
	}
	return nil
}

// pruneStatements deletes the records of statement runs older than
// Config.StatementRecords, then the runs older than the retention period,
// in batches, each provider's last finished run excepted. Neither is
// archived: what a run changed is in its operations' histories (its
// evidence and review events) and in the unmatched evidence it opened,
// and the run's counts are in the providers' totals of /metrics.
func (p *Pruner) pruneStatements(ctx context.Context, s *Summary, start time.Time, dryRun bool, progress func()) error {
	records := start.Add(-p.cfg.StatementRecords)
	for {
		got, err := p.cfg.Store.PruneStatementRecords(ctx, records, p.cfg.Batch, dryRun)
		if err != nil {
			return fmt.Errorf("retention: %w", err)
		}
		s.StatementRecords += got.Records
		progress()
		if got.Done {
			break
		}
	}
	for {
		got, err := p.cfg.Store.PruneStatementRuns(ctx, s.Cutoff, p.cfg.Batch, dryRun)
		if err != nil {
			return fmt.Errorf("retention: %w", err)
		}
		s.StatementRuns += got.Runs
		if !dryRun {
			// A dry run's records of these runs were counted above: the
			// records' cutoff is never before the runs'.
			s.StatementRecords += got.Records
		}
		progress()
		if got.Done {
			return nil
		}
	}
}

// pruneKeyTombstones deletes the key tombstones older than
// Config.KeyTombstones, in batches. Not archived: the operation each
// stood for is in the archive of the run that pruned it.
func (p *Pruner) pruneKeyTombstones(ctx context.Context, s *Summary, start time.Time, dryRun bool, progress func()) error {
	cutoff := start.Add(-p.cfg.KeyTombstones)
	var after ledger.KeyTombstonesCursor
	for {
		got, err := p.cfg.Store.PruneKeyTombstones(ctx, cutoff, after, p.cfg.Batch, dryRun)
		if err != nil {
			return fmt.Errorf("retention: %w", err)
		}
		s.KeyTombstones += got.Deleted
		progress()
		if got.Done {
			return nil
		}
		after = got.Next
	}
}

// Start prunes every Config.Interval until Stop (the first run one
// interval after Start). A run another process holds the lock for is
// skipped; an error is logged and the next interval tries again.
func (p *Pruner) Start(ctx context.Context) error {
	if p.cfg.Archive == "" {
		return errors.New("retention: no archive configured")
	}
	return p.loop.Start(ctx, func(ctx context.Context) {
		startstop.Every(ctx, p.cfg.Interval, func(ctx context.Context) error {
			_, err := p.Run(ctx, false)
			if errors.Is(err, ErrBusy) {
				p.cfg.Logger.InfoContext(ctx, "prune skipped: another process is pruning")
				return nil
			}
			return err
		}, func(ctx context.Context, err error) {
			p.cfg.Logger.ErrorContext(ctx, "prune failed", "error", err)
		})
	})
}

// Stop ends the loop, waiting for a run in progress to stop at its
// current batch (which rolls back).
func (p *Pruner) Stop() { p.loop.Stop() }

// ParseDuration reads a retention period: a whole number of days ("90d")
// or a Go duration ("36h", "90m").
func ParseDuration(s string) (time.Duration, error) {
	s = strings.TrimSpace(s)
	if days, ok := strings.CutSuffix(s, "d"); ok {
		n, err := strconv.ParseInt(days, 10, 32)
		if err != nil || n <= 0 {
			return 0, fmt.Errorf("%q is not a positive number of days such as 90d", s)
		}
		return time.Duration(n) * 24 * time.Hour, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil || d <= 0 {
		return 0, fmt.Errorf("%q is neither a number of days such as 90d nor a positive duration such as 36h", s)
	}
	return d, nil
}
