package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/actledger/actledger/client"
)

// errRunNotComplete makes `reconcile` exit 1 after printing a run that
// failed or stopped early: what it read is printed, missing was not
// judged.
var errRunNotComplete = errors.New("the run did not complete")

// reconcileCmd is `actledger reconcile PROVIDER [--since D] [--until T]
// [--dry-run]`: one run of the provider's statement now, through the API
// with an operator token. It prints one line per finding with its count,
// then one line per record or operation that needs a person.
func reconcileCmd(ctx context.Context, getenv func(string) string, args []string, stdout io.Writer) error {
	if isHelp(args) {
		fmt.Fprint(stdout, usage)
		return nil
	}
	fs := newFlagSet("reconcile", io.Discard)
	since := fs.String("since", "", "read records created since then: a duration back from now (30m, 24h) or an RFC 3339 time; default the provider's window")
	until := fs.String("until", "", "until then, the same forms; default now minus the provider's lag")
	dryRun := fs.Bool("dry-run", false, "judge and print, change nothing")
	pos, err := parseInterspersed(fs, args)
	if err != nil || len(pos) != 1 {
		return fmt.Errorf("reconcile PROVIDER [--since D] [--until T] [--dry-run]: %w", errUsage)
	}
	now := time.Now()
	req := client.ReconcileRequest{Provider: pos[0], DryRun: *dryRun}
	if req.Since, err = pointInTime("--since", *since, now); err != nil {
		return err
	}
	if req.Until, err = pointInTime("--until", *until, now); err != nil {
		return err
	}
	c, err := apiClient(getenv, "operator")
	if err != nil {
		return err
	}
	res, err := c.Reconcile(ctx, req)
	if err != nil {
		return fmt.Errorf("reconcile %s: %w", pos[0], err)
	}
	printReconciliation(stdout, res)
	switch res.Reconciliation.Status {
	case "complete":
		return nil
	case "yielded":
		return fmt.Errorf("reconcile %s: another run of this provider is under way (%s)", pos[0], deref(res.Reconciliation.Error))
	default:
		return fmt.Errorf("reconcile %s: %s: %w", pos[0], res.Reconciliation.Status, errRunNotComplete)
	}
}

// pointInTime reads a flag that is a duration back from now or an RFC
// 3339 time; empty is nil (the provider's default).
func pointInTime(flag, v string, now time.Time) (*time.Time, error) {
	if v == "" {
		return nil, nil
	}
	if d, err := time.ParseDuration(v); err == nil {
		if d < 0 {
			return nil, fmt.Errorf("%s %s: a duration back from now must not be negative: %w", flag, v, errUsage)
		}
		t := now.Add(-d)
		return &t, nil
	}
	t, err := time.Parse(time.RFC3339, v)
	if err != nil {
		return nil, fmt.Errorf("%s %q: not a duration (30m, 24h) nor an RFC 3339 time: %w", flag, v, errUsage)
	}
	return &t, nil
}

// findingOrder is the order findings are printed in.
var findingOrder = []string{"matched", "settles", "mismatch", "duplicate", "missing", "unexplained", "foreign", "skipped"}

func printReconciliation(w io.Writer, res *client.ReconcileResult) {
	run := res.Reconciliation
	if res.DryRun {
		fmt.Fprintln(w, "dry run: nothing was changed")
	}
	printf(w, "%s: %s, records created in [%s, %s), %d page(s)\n", run.Provider, run.Status,
		run.Since.Format(time.RFC3339), run.Until.Format(time.RFC3339), run.Pages)
	if run.Error != nil {
		printf(w, "  %s\n", *run.Error)
	}
	for _, f := range findingOrder {
		note := ""
		if f == "missing" && run.Status != "complete" {
			note = " (not judged: the window was not read in full)"
		}
		printf(w, "%-12s %d%s\n", f, run.Findings[f], note)
	}
	for _, f := range res.Attention {
		line := f.Finding
		if f.OperationID != nil {
			line += " operation " + *f.OperationID
		}
		if f.Reference != nil {
			line += " reference " + *f.Reference
		}
		if f.ProviderReference != nil {
			line += " record " + *f.ProviderReference
		}
		if f.Skipped != nil {
			line += ": " + *f.Skipped
		}
		printf(w, "  %s\n", line)
	}
	if res.AttentionNotListed > 0 {
		printf(w, "  ... and %d more (GET /v1/reconciliations, the console's review page)\n", res.AttentionNotListed)
	}
}
