package main

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/actledger/actledger/client"
)

// apiClient returns a client of the running actledger's API
// (ACTLEDGER_URL, default http://$LISTEN_ADDR) with ACTLEDGER_TOKEN, so the
// CLI sees exactly what the token's role and tenant may see. need names the
// role, for the message when no token is set.
func apiClient(getenv func(string) string, need string) (*client.Client, error) {
	token := getenv("ACTLEDGER_TOKEN")
	if token == "" {
		return nil, fmt.Errorf("set ACTLEDGER_TOKEN to an %s token (actledger token create --tenant T --role %s)", need, need)
	}
	base := cmp.Or(getenv("ACTLEDGER_URL"), "http://"+cmp.Or(getenv("LISTEN_ADDR"), "127.0.0.1:8080"))
	return client.New(base, token, client.Options{UserAgent: "actledger-cli"}), nil
}

// isHelp reports whether args asks for a command's usage (help, -h,
// --help), which needs no token.
func isHelp(args []string) bool {
	return len(args) > 0 && (args[0] == "help" || args[0] == "-h" || args[0] == "--help")
}

// ops is `actledger ops ...`, the operator's commands.
func ops(ctx context.Context, getenv func(string) string, args []string, stdout io.Writer) error {
	if len(args) == 0 {
		return fmt.Errorf("ops needs a command: %w", errUsage)
	}
	if isHelp(args) {
		fmt.Fprint(stdout, usage)
		return nil
	}
	c, err := apiClient(getenv, "operator")
	if err != nil {
		return err
	}
	switch args[0] {
	case "pause", "resume":
		fs := newFlagSet("ops "+args[0], io.Discard)
		providerName := fs.String("provider", "", "only this provider")
		action := fs.String("action", "", "only this action")
		if err := fs.Parse(args[1:]); err != nil || fs.NArg() > 0 {
			return fmt.Errorf("ops %s [--provider P] [--action A]: %w", args[0], errUsage)
		}
		call := c.PauseDispatch
		if args[0] == "resume" {
			call = c.ResumeDispatch
		}
		status, err := call(ctx, client.DispatchScope{Provider: *providerName, Action: *action})
		if err != nil {
			return err
		}
		if args[0] == "resume" {
			// A resume removes every pause within its scope and is
			// harmless when nothing was paused.
			printf(stdout, "resumed: %d pause(s) removed, %d operation(s) released\n", status.Removed, status.Released)
		}
		return printDispatch(stdout, status)
	case "dispatch":
		if len(args) != 1 {
			return fmt.Errorf("ops dispatch takes no arguments: %w", errUsage)
		}
		status, err := c.AllDispatch(ctx)
		if err != nil {
			return err
		}
		return printDispatch(stdout, status)
	case "list":
		if len(args) != 1 {
			return fmt.Errorf("ops list takes no arguments: %w", errUsage)
		}
		return opsList(ctx, c, stdout)
	case "show":
		if len(args) != 2 {
			return fmt.Errorf("ops show ID: %w", errUsage)
		}
		return opsShow(ctx, c, args[1], stdout)
	case "resolve":
		return opsResolve(ctx, c, args[1:], stdout)
	case "retry":
		fs := newFlagSet("ops retry", io.Discard)
		note := fs.String("note", "", "why it is safe to send again")
		if len(args) < 2 {
			return fmt.Errorf("ops retry ID [--note N]: %w", errUsage)
		}
		if err := fs.Parse(args[2:]); err != nil {
			return fmt.Errorf("%v: %w", err, errUsage)
		}
		if fs.NArg() > 0 {
			return fmt.Errorf("ops retry ID [--note N]: unexpected %q: %w", fs.Args(), errUsage)
		}
		op, err := c.RetryOperation(ctx, args[1], *note)
		if err != nil {
			return err
		}
		printf(stdout, "%s is %s again; it will be sent with the same external key %s\n", op.ID, op.Status, op.ExternalKey)
		return nil
	case "replay":
		return opsReplay(ctx, c, args[1:], stdout)
	default:
		return fmt.Errorf("unknown ops command %q: %w", args[0], errUsage)
	}
}

// printDispatch prints the pauses in force and the calls in flight.
func printDispatch(w io.Writer, s *client.DispatchStatus) error {
	if len(s.Paused) == 0 {
		fmt.Fprintln(w, "dispatch: running (no pause)")
	}
	for _, p := range s.Paused {
		printf(w, "PAUSED provider=%s action=%s by %s at %s\n", cmp.Or(p.Provider, "*"), cmp.Or(p.Action, "*"), p.PausedBy, p.PausedAt)
		if p.Reason != "" {
			printf(w, "  reason=%s: %s; requests wait queued; settle the window with the suppliers' records, then `ops resume`\n",
				p.Reason, p.Detail)
		}
	}
	printf(w, "in flight: %d (these may still land at the provider)\n", len(s.InFlight))
	for _, op := range s.InFlight {
		printf(w, "  %s  %-24s %-16s provider=%s worker=%s age=%.1fs attempts=%d\n",
			op.OperationID, op.Action, op.Key, op.Provider, op.LeaseOwner, op.AgeSeconds, op.Attempts)
	}
	return nil
}

// opsList prints what is stuck: every open review item, oldest first.
func opsList(ctx context.Context, c *client.Client, w io.Writer) error {
	items, err := c.AllReview(ctx)
	if err != nil {
		return err
	}
	if len(items) == 0 {
		fmt.Fprintln(w, "nothing waits for a person")
		return nil
	}
	printf(w, "%-38s %-22s %-16s %-8s %-12s %s\n", "ID", "REASON", "KEY", "AGE", "OWNER", "RETRY")
	for _, it := range items {
		id := "evidence/" + fmt.Sprint(deref(it.EvidenceID))
		if it.OperationID != nil {
			id = *it.OperationID
		}
		retry := "no"
		if it.RetryAllowed {
			retry = "allowed"
		}
		printf(w, "%-38s %-22s %-16s %-8s %-12s %s\n", id, it.Reason, it.Key,
			(time.Duration(it.AgeSeconds) * time.Second).String(), it.Owner, retry)
	}
	return nil
}

func deref[T any](p *T) T {
	var zero T
	if p == nil {
		return zero
	}
	return *p
}

// opsShow prints one operation, its review facts if any, and its history.
func opsShow(ctx context.Context, c *client.Client, id string, w io.Writer) error {
	op, err := c.GetOperation(ctx, id)
	if err != nil {
		return err
	}
	events, err := c.AllOperationEvents(ctx, id)
	if err != nil {
		return err
	}
	var fields map[string]any
	raw, _ := json.Marshal(op)
	_ = json.Unmarshal(raw, &fields)
	for _, k := range []string{"id", "action", "key", "status", "provider", "external_key", "provider_reference", "attempts", "approval_id", "created_at", "updated_at"} {
		v := fields[k]
		if v == nil {
			v = "none" // a null field (provider_reference before any effect)
		}
		printf(w, "%-19s %v\n", k+":", v)
	}
	printf(w, "%-19s %s\n", "params:", op.Params)
	if r := op.Review; r != nil {
		deadline := "none"
		if r.Deadline != nil {
			deadline = r.Deadline.UTC().Format(time.RFC3339)
		}
		printf(w, "%-19s %v (owner %v, deadline %v)\n", "review:", r.Reason, r.Owner, deadline)
		if items, err := c.AllReview(ctx); err == nil {
			for _, it := range items {
				if it.OperationID != nil && *it.OperationID == op.ID {
					printf(w, "%-19s %v\n", "retry allowed:", it.RetryAllowed)
					if it.LookupReliableAfter != nil {
						printf(w, "%-19s %s\n", "lookup reliable:", it.LookupReliableAfter.Format(time.RFC3339))
					}
					printf(w, "%-19s %s\n", "facts:", mustJSON(it.Facts))
					printf(w, "%-19s %s\n", "last answer:", mustJSON(it.LastProviderAnswer))
				}
			}
		}
	}
	printf(w, "%-19s %v\n\nhistory:\n", "summary:", op.Summary)
	for _, e := range events {
		from := "·"
		if e.From != nil {
			from = string(*e.From)
		}
		printf(w, "  %3d %s %-24s %-12s → %-12s %s\n      %s\n", e.Seq, e.At.UTC().Format(time.RFC3339Nano), e.Kind, from, e.To, e.Actor, e.Detail)
	}
	return nil
}

func mustJSON(v any) string {
	raw, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	return string(raw)
}

// opsResolve is `ops resolve ID --outcome succeeded|failed|cancelled
// [--reference R] --note N`, or `ops resolve evidence/N --note N` for
// unmatched evidence.
func opsResolve(ctx context.Context, c *client.Client, args []string, w io.Writer) error {
	if len(args) < 1 {
		return fmt.Errorf("ops resolve ID --outcome succeeded|failed|cancelled [--reference R] --note N: %w", errUsage)
	}
	fs := newFlagSet("ops resolve", io.Discard)
	outcome := fs.String("outcome", "", "succeeded, failed (confirmed no effect) or cancelled")
	reference := fs.String("reference", "", "the provider's reference (required for succeeded)")
	note := fs.String("note", "", "what you checked; it is kept in the history")
	if err := fs.Parse(args[1:]); err != nil {
		return fmt.Errorf("%v: %w", err, errUsage)
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("ops resolve ID: unexpected %q (quote a note of several words): %w", fs.Args(), errUsage)
	}
	if *note == "" {
		return fmt.Errorf("ops resolve needs --note: say what you checked: %w", errUsage)
	}
	if n, ok := strings.CutPrefix(args[0], "evidence/"); ok {
		id, err := strconv.ParseInt(n, 10, 64)
		if err != nil {
			return fmt.Errorf("ops resolve evidence/N: N must be the evidence number: %w", errUsage)
		}
		if err := c.ResolveEvidence(ctx, id, *note); err != nil {
			return err
		}
		printf(w, "evidence %s resolved\n", n)
		return nil
	}
	// The answer is the operation itself, plus the linked compensation
	// operation when the resolution created one.
	op, err := c.ResolveOperation(ctx, args[0], client.Resolution{Outcome: *outcome, ProviderReference: *reference, Note: *note})
	if err != nil {
		return err
	}
	printf(w, "%s is %s\n", op.ID, op.Status)
	if comp := op.Compensation; comp != nil {
		printf(w, "compensation %s (%s) is %s\n", comp.ID, comp.Action, comp.Status)
	}
	return nil
}

// opsReplay is `ops replay [--since D] [--reason R] [--dry-run]`: it
// prints each item as the server settles it, then the totals.
func opsReplay(ctx context.Context, c *client.Client, args []string, w io.Writer) error {
	fs := newFlagSet("ops replay", io.Discard)
	since := fs.String("since", "", "only items announced since then: RFC 3339 time or a duration such as 24h")
	reason := fs.String("reason", "", "only items of this review reason")
	dryRun := fs.Bool("dry-run", false, "show what would change, change nothing")
	if err := fs.Parse(args); err != nil || fs.NArg() > 0 {
		return fmt.Errorf("ops replay [--since D] [--reason R] [--dry-run]: %w", errUsage)
	}
	if *dryRun {
		fmt.Fprintln(w, "dry run: nothing will be changed")
	}
	n := 0
	sum, err := c.Replay(ctx, client.ReplayRequest{Since: *since, Reason: *reason, DryRun: *dryRun}, func(it client.ReplayItem) {
		n++
		mark := " "
		if it.Changed {
			mark = "*"
		}
		printf(w, "[%d] %s %-16s %-22s %s %s\n", n, mark, it.Key, it.Reason, it.Result, it.Detail)
	})
	if err != nil {
		return fmt.Errorf("replay: %w", err)
	}
	printf(w, "replayed %d review message(s): %d item(s), %d open, %d changed, %d unchanged\n", sum.Read, sum.Items, sum.Open, sum.Changed, sum.Unchanged)
	return nil
}
