package main

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"time"

	"github.com/actledger/actledger/broker"
	"github.com/actledger/actledger/ledger"
)

// recoverCmd is `actledger recover --since T [--margin D] [--dry-run]
// [--batch N]`: after a failover to an asynchronous replica or a
// point-in-time restore lost the ledger's latest changes, the operations
// of the window become unknown (ledger.Store.Recover), the ledger_behind
// pauses are lifted, and it prints what it moved and what a person looks
// at next. It writes dispatch messages to the outbox, on the subjects of
// STREAM_PREFIX, and needs no NATS: the relays of the running processes
// publish them.
func recoverCmd(ctx context.Context, e env, args []string, stdout io.Writer, logger *slog.Logger) error {
	fs := newFlagSet("recover", io.Discard)
	since := fs.String("since", "", "when the ledger may have started to lose changes (the failover, the restore's target time): an RFC 3339 time or a duration back from now (15m)")
	margin := fs.Duration("margin", ledger.DefaultRecoveryMargin, "taken off --since: the clocks' difference and the replication lag worth worrying about")
	dryRun := fs.Bool("dry-run", false, "count what would move and be lifted; change nothing")
	batch := fs.Int("batch", 0, "operations per transaction (default 500)")
	if err := fs.Parse(args); err != nil {
		return fmt.Errorf("%v: %w", err, errUsage)
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("recover takes only flags, got %q: %w", fs.Args(), errUsage)
	}
	if *since == "" {
		return fmt.Errorf("recover needs --since, the time from which the ledger may have lost changes: %w", errUsage)
	}
	now := time.Now()
	t, err := pointInTime("--since", *since, now)
	if err != nil {
		return err
	}
	if t.After(now) {
		return fmt.Errorf("--since %s is in the future (now is %s): nothing can have changed after it; give the time of the failover or the restore's target time: %w",
			t.UTC().Format(time.RFC3339), now.UTC().Format(time.RFC3339), errUsage)
	}
	if *margin < 0 || *batch < 0 {
		return fmt.Errorf("--margin and --batch must not be negative: %w", errUsage)
	}
	pool, stop, err := openDatabase(ctx, e, logger)
	if err != nil {
		return err
	}
	defer stop()
	store := ledger.New(pool, ledger.Config{Subjects: broker.Subjects{Prefix: cmp.Or(e.StreamPrefix, broker.DefaultPrefix)}})
	// --margin 0 asks for no margin, while RecoverOptions' zero means
	// the default: a nanosecond is none.
	m := *margin
	if m == 0 {
		m = time.Nanosecond
	}
	r, err := store.Recover(ctx, ledger.RecoverOptions{Since: *t, Margin: m, Batch: *batch, DryRun: *dryRun, Logger: logger})
	if r.Moved != nil {
		printRecovery(stdout, r, *margin, err == nil)
	}
	return err
}

// printRecovery says what r moved (or would move) and what to look at
// next; done is false when the recovery stopped on an error.
func printRecovery(w io.Writer, r ledger.Recovery, margin time.Duration, done bool) {
	verb := "moved to unknown"
	if r.DryRun {
		printf(w, "dry run: nothing was changed\n")
		verb = "would move to unknown"
	}
	printf(w, "window: operations whose last recorded change is after %s (--since %s minus a margin of %s)\n",
		r.From.Format(time.RFC3339), r.Since.Format(time.RFC3339), margin)
	if r.Oldest != nil && r.From.Before(*r.Oldest) {
		printf(w, "warning: the window starts before the oldest operation (created %s): it is the whole ledger\n", r.Oldest.UTC().Format(time.RFC3339))
	}
	printf(w, "%s (event %s): %d\n", verb, ledger.EventLedgerRecovery, r.Total())
	for _, st := range []ledger.Status{ledger.StatusQueued, ledger.StatusRetryWait, ledger.StatusDispatching} {
		printf(w, "  %-12s %d\n", st, r.Moved[st])
	}
	if len(r.Sample) > 0 {
		ids := make([]string, len(r.Sample))
		for i, id := range r.Sample {
			ids[i] = id.String()
		}
		printf(w, "  e.g. %s (%d of %d; actledger ops show ID)\n", strings.Join(ids, ", "), len(ids), r.Total())
	}
	printf(w, "left as they were:\n")
	printf(w, "  %-30s %d  being settled; a recovery never moves them again\n", "already unknown", r.AlreadyUnknown)
	printf(w, "  %-30s %d  a person decides\n", "in review", r.InReview)
	printf(w, "  %-30s %d  their worker's answer settles them, or the lease sweeper once the lease ends\n", "dispatching under a live lease", r.LiveLease)
	if r.MovedMeanwhile > 0 {
		printf(w, "  %-30s %d  changed while the recovery ran; run it again to judge them\n", "changed meanwhile", r.MovedMeanwhile)
	}
	if r.Total() == 0 && r.AlreadyUnknown > 0 && !r.DryRun {
		printf(w, "nothing new to move: the window's operations are unknown already (a repeated recovery changes nothing)\n")
	}
	switch {
	case !done:
		printf(w, "the recovery stopped before its end: dispatch stays paused (%s) and the moves above are made; run the same command again to finish\n", ledger.PauseLedgerBehind)
	case r.DryRun:
		printf(w, "%s pauses: %d made by a proof of the loss; a run lifts them (and its own, which holds dispatch while it runs)", ledger.PauseLedgerBehind, r.Detected)
		if r.PausesKept > 0 {
			printf(w, ", and keeps %d operator pause(s)", r.PausesKept)
		}
		printf(w, "\n")
	default:
		printf(w, "%s pauses lifted: the recovery's own, and %d a proof of the loss had made; dispatch resumed for %d tenant(s), %d waiting operation(s) released\n",
			ledger.PauseLedgerBehind, r.Detected, r.Resumed, r.Released)
		if r.PausesKept > 0 {
			printf(w, "operator pauses kept: %d (they hold until an operator resumes: actledger ops resume)\n", r.PausesKept)
		}
	}
	printf(w, "next:\n")
	printf(w, "  1. the moved operations settle by a resend under their key (inside the provider's idempotency retention), a lookup once absence is believable, or a person; follow them with actledger ops list and the console's review page\n")
	printf(w, "  2. reconcile the window against each provider's statement (operator token; a provider without a statement: its own records):\n")
	providers := r.Providers
	if len(providers) == 0 {
		providers = []string{"PROVIDER"}
	}
	for _, p := range providers {
		printf(w, "       actledger reconcile %s --since %s\n", p, r.From.Format(time.RFC3339))
	}
	printf(w, "     its unexplained records are effects no operation of the ledger explains: the ledger lost those operations\n")
}
