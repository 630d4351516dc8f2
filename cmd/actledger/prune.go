package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"slices"
	"time"

	"github.com/actledger/actledger/ledger"
	"github.com/actledger/actledger/provider"
	"github.com/actledger/actledger/retention"
)

// prune is `actledger prune`: one run of the retention pruner, with the
// retention period and archive of its flags (default: the environment's
// RETENTION_OLDER_THAN and RETENTION_ARCHIVE). It prints the summary;
// with --dry-run, what would go, deleting and archiving nothing. The
// archive's lines go to stdout with --archive -, and the summary then to
// the log only.
func prune(ctx context.Context, e env, args []string, stdout io.Writer, logger *slog.Logger) error {
	fs := newFlagSet("prune", io.Discard)
	olderThan := fs.String("older-than", "", "retention period: terminal operations unchanged for longer go (90d, 36h); default $RETENTION_OLDER_THAN")
	archive := fs.String("archive", e.Retention.Archive, "directory for the archive file, or - for stdout; default $RETENTION_ARCHIVE")
	dryRun := fs.Bool("dry-run", false, "count what would go; delete nothing")
	batch := fs.Int("batch", 0, "operations per transaction (default 500)")
	providers := fs.String("providers", e.ProvidersFile, "providers file whose longest idempotency.retention key tombstones outlive (default $PROVIDERS_FILE; without one, the retention period)")
	if err := fs.Parse(args); err != nil {
		return fmt.Errorf("%v: %w", err, errUsage)
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("prune takes only flags, got %q: %w", fs.Args(), errUsage)
	}
	period := e.Retention.OlderThan
	if *olderThan != "" {
		d, err := retention.ParseDuration(*olderThan)
		if err != nil {
			return fmt.Errorf("--older-than: %v: %w", err, errUsage)
		}
		period = d
	}
	if period <= 0 {
		return fmt.Errorf("prune needs --older-than (or RETENTION_OLDER_THAN): %w", errUsage)
	}
	if *archive == "" && !*dryRun {
		return fmt.Errorf("prune needs --archive DIR or --archive - (or RETENTION_ARCHIVE): pruned operations are archived first: %w", errUsage)
	}
	var tombstones time.Duration
	if *providers != "" {
		registry, err := provider.LoadEnv(*providers, e.Getenv)
		if err != nil {
			return err
		}
		tombstones = registry.LongestIdempotencyRetention()
	}
	pool, stop, err := openDatabase(ctx, e, logger)
	if err != nil {
		return err
	}
	defer stop()
	p, err := retention.New(retention.Config{
		Store: ledger.New(pool, ledger.Config{}), Pool: pool, OlderThan: period, Archive: *archive,
		Stdout: stdout, Batch: *batch, Logger: logger, KeyTombstones: tombstones,
	})
	if err != nil {
		return err
	}
	s, err := p.Run(ctx, *dryRun)
	if err != nil {
		return err
	}
	if *archive == retention.Stdout && !*dryRun {
		return nil
	}
	verb := "pruned"
	if s.DryRun {
		verb = "would prune"
	}
	fmt.Fprintf(stdout, "%s %d operations (", verb, s.Operations)
	for i, st := range slices.Sorted(maps.Keys(s.ByStatus)) {
		if i > 0 {
			fmt.Fprint(stdout, ", ")
		}
		fmt.Fprintf(stdout, "%s %d", st, s.ByStatus[st])
	}
	fmt.Fprintf(stdout, ") unchanged since before %s, %d events, %d stale results, %d key-conflict counts, %d webhook events, %d outbox messages, %d statement runs, %d statement records, %d key tombstones in %s",
		s.Cutoff.Format(time.RFC3339), s.Events, s.StaleResults, s.KeyConflicts, s.WebhookEvents, s.OutboxMessages,
		s.StatementRuns, s.StatementRecords, s.KeyTombstones, s.Duration.Round(time.Millisecond))
	if s.Archive != "" {
		fmt.Fprintf(stdout, "; archive %s", s.Archive)
	}
	fmt.Fprintln(stdout)
	return nil
}
