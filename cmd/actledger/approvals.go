package main

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/actledger/actledger/client"
)

// approvals is `actledger approvals ...`, the approver's commands, over
// the HTTP API with an approver token (ACTLEDGER_TOKEN). stdin is where a
// person confirms an approve that names no fingerprint; it must be a
// terminal for that.
func approvals(ctx context.Context, getenv func(string) string, args []string, stdin io.Reader, stdout io.Writer) error {
	if len(args) == 0 {
		return fmt.Errorf("approvals needs a command: %w", errUsage)
	}
	if isHelp(args) {
		fmt.Fprint(stdout, usage)
		return nil
	}
	c, err := apiClient(getenv, "approver")
	if err != nil {
		return err
	}
	switch args[0] {
	case "list":
		if len(args) != 1 {
			return fmt.Errorf("approvals list: %w", errUsage)
		}
		return approvalsList(ctx, c, stdout)
	case "approve":
		return approvalsApprove(ctx, c, args[1:], stdin, stdout)
	case "deny":
		fs := newFlagSet("approvals deny", io.Discard)
		reason := fs.String("reason", "", "why it is declined; the agent and its user are told")
		if len(args) < 2 {
			return fmt.Errorf("approvals deny ID --reason R: %w", errUsage)
		}
		if err := fs.Parse(args[2:]); err != nil || fs.NArg() > 0 || *reason == "" {
			return fmt.Errorf("approvals deny ID --reason R: %w", errUsage)
		}
		op, err := c.Deny(ctx, args[1], *reason)
		if err != nil {
			return err
		}
		printf(stdout, "%s is %s: %s\n", op.ID, op.Status, op.Summary)
		return nil
	default:
		return fmt.Errorf("unknown approvals command %q: %w", args[0], errUsage)
	}
}

// approvalsList prints every open proposal of the token's tenant, oldest
// first, with its params in full: what is shown is what an approve
// approves. Every value the server sent is printed through printf, so a
// reason cannot print a line of its own (a forged "params:") or hide one.
func approvalsList(ctx context.Context, c *client.Client, w io.Writer) error {
	items, err := c.AllApprovalRequests(ctx)
	if err != nil {
		return err
	}
	if len(items) == 0 {
		fmt.Fprintln(w, "no approval requests: nothing waits for a decision")
		return nil
	}
	for _, r := range items {
		expires := "never"
		if r.ExpiresAt != nil {
			expires = r.ExpiresAt.UTC().Format(time.RFC3339)
		}
		printf(w, "%s  %s  key=%s  by %s  age=%ds  expires %s\n", r.OperationID, r.Action, r.Key, r.RequestedBy, r.AgeSeconds, expires)
		printf(w, "  provider %s (account %s, environment %s)\n", r.Provider, r.Account, r.Environment)
		if r.Reason != "" {
			printf(w, "  reason: %s\n", r.Reason)
		}
		printf(w, "  params: %s\n  fingerprint: %s\n", r.Params, r.ParamsFingerprint)
	}
	return nil
}

// approvalsApprove approves a proposal. The fingerprint is the one the
// approver saw (--fingerprint, from `approvals list`); without it the CLI
// reads the proposal, prints its params and asks the person at the
// terminal to confirm them, then approves exactly those, so a change
// between reading and approving is refused by the server. Without a
// terminal nobody can have seen the params, so it refuses and names
// --fingerprint.
func approvalsApprove(ctx context.Context, c *client.Client, args []string, stdin io.Reader, stdout io.Writer) error {
	usage := fmt.Errorf("approvals approve ID [--fingerprint F] [--ttl D] [--policy-version V] [--note N]: %w", errUsage)
	if len(args) < 1 {
		return usage
	}
	id := args[0]
	fs := newFlagSet("approvals approve", io.Discard)
	fingerprint := fs.String("fingerprint", "", "the params fingerprint you approve (from approvals list)")
	ttl := fs.Duration("ttl", 0, "how long the approval stays valid for dispatch (default: the action's approval_ttl)")
	policyVersion := fs.String("policy-version", "", "policy version to record (default: the action's)")
	note := fs.String("note", "", "a remark kept on the approval")
	if err := fs.Parse(args[1:]); err != nil || fs.NArg() > 0 {
		return usage
	}
	if *fingerprint == "" {
		if !isTerminal(stdin) {
			return fmt.Errorf("approvals approve %s: stdin is not a terminal, so nobody can confirm the params: "+
				"pass --fingerprint with the fingerprint `actledger approvals list` showed you: %w", id, errUsage)
		}
		op, err := c.GetOperation(ctx, id)
		if err != nil {
			return err
		}
		printf(stdout, "%s %s (key %s) asks to send\n  params: %s\n  fingerprint: %s\n", op.Action, op.ID, op.Key, op.Params, op.ParamsFingerprint)
		if err := confirm(ctx, stdin, stdout, "Approve exactly these params? [y/N] "); err != nil {
			return err
		}
		*fingerprint = op.ParamsFingerprint
	}
	req := client.ApproveRequest{ParamsFingerprint: *fingerprint, PolicyVersion: *policyVersion, Note: *note}
	if *ttl > 0 {
		req.TTLSeconds = int64((*ttl + time.Second - 1) / time.Second)
	}
	op, err := c.Approve(ctx, id, req)
	if err != nil {
		return err
	}
	approval := "none"
	if op.ApprovalID != nil {
		approval = *op.ApprovalID
	}
	printf(stdout, "%s is %s under approval %s\n", op.ID, op.Status, approval)
	return nil
}
