package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/url"
	"time"
)

// approvalRequest is one entry of GET /v1/approval-requests as the CLI
// shows it.
type approvalRequest struct {
	OperationID       string          `json:"operation_id"`
	Action            string          `json:"action"`
	Key               string          `json:"key"`
	Params            json.RawMessage `json:"params"`
	ParamsFingerprint string          `json:"params_fingerprint"`
	Reason            string          `json:"reason"`
	RequestedBy       string          `json:"requested_by"`
	Provider          string          `json:"provider"`
	Account           string          `json:"account"`
	Environment       string          `json:"environment"`
	AgeSeconds        int64           `json:"age_seconds"`
	ExpiresAt         *time.Time      `json:"expires_at"`
}

// approvals is `actledger approvals ...`, the approver's commands, over
// the HTTP API with an approver token (ACTLEDGER_TOKEN).
func approvals(ctx context.Context, getenv func(string) string, args []string, stdout io.Writer) error {
	if len(args) == 0 {
		return fmt.Errorf("approvals needs a command: %w", errUsage)
	}
	if getenv("ACTLEDGER_TOKEN") == "" {
		return errors.New("set ACTLEDGER_TOKEN to an approver token (actledger token create --tenant T --role approver)")
	}
	c, err := newOpsClient(getenv)
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
		return approvalsApprove(ctx, c, args[1:], stdout)
	case "deny":
		fs := newFlagSet("approvals deny", io.Discard)
		reason := fs.String("reason", "", "why it is declined; the agent and its user are told")
		if len(args) < 2 {
			return fmt.Errorf("approvals deny ID --reason R: %w", errUsage)
		}
		if err := fs.Parse(args[2:]); err != nil || fs.NArg() > 0 || *reason == "" {
			return fmt.Errorf("approvals deny ID --reason R: %w", errUsage)
		}
		var op map[string]any
		if err := c.call(ctx, "POST", "/v1/operations/"+url.PathEscape(args[1])+"/deny", map[string]string{"reason": *reason}, &op); err != nil {
			return err
		}
		fmt.Fprintf(stdout, "%s is %s: %s\n", op["id"], op["status"], op["summary"])
		return nil
	default:
		return fmt.Errorf("unknown approvals command %q: %w", args[0], errUsage)
	}
}

// approvalsList prints every open proposal of the token's tenant, oldest
// first, with its params in full: what is shown is what an approve
// approves.
func approvalsList(ctx context.Context, c *opsClient, w io.Writer) error {
	var items []approvalRequest
	err := getPages(ctx, c, "/v1/approval-requests", func(page struct {
		Items []approvalRequest `json:"items"`
	}) {
		items = append(items, page.Items...)
	})
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
		fmt.Fprintf(w, "%s  %s  key=%s  by %s  age=%ds  expires %s\n", r.OperationID, r.Action, r.Key, r.RequestedBy, r.AgeSeconds, expires)
		fmt.Fprintf(w, "  provider %s (account %s, environment %s)\n", r.Provider, r.Account, r.Environment)
		if r.Reason != "" {
			fmt.Fprintf(w, "  reason: %s\n", r.Reason)
		}
		fmt.Fprintf(w, "  params: %s\n  fingerprint: %s\n", r.Params, r.ParamsFingerprint)
	}
	return nil
}

// approvalsApprove approves a proposal. The fingerprint is the one the
// approver saw (--fingerprint, from `approvals list`); without it the CLI
// reads the proposal, prints its params and approves exactly those, so a
// change between reading and approving is refused by the server.
func approvalsApprove(ctx context.Context, c *opsClient, args []string, stdout io.Writer) error {
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
		var op struct {
			Action            string          `json:"action"`
			Status            string          `json:"status"`
			Params            json.RawMessage `json:"params"`
			ParamsFingerprint string          `json:"params_fingerprint"`
		}
		if err := c.call(ctx, "GET", "/v1/operations/"+url.PathEscape(id), nil, &op); err != nil {
			return err
		}
		fmt.Fprintf(stdout, "approving %s %s\n  params: %s\n  fingerprint: %s\n", op.Action, id, op.Params, op.ParamsFingerprint)
		*fingerprint = op.ParamsFingerprint
	}
	body := map[string]any{"params_fingerprint": *fingerprint}
	if *ttl > 0 {
		body["ttl_seconds"] = int64((*ttl + time.Second - 1) / time.Second)
	}
	if *policyVersion != "" {
		body["policy_version"] = *policyVersion
	}
	if *note != "" {
		body["note"] = *note
	}
	var op map[string]any
	if err := c.call(ctx, "POST", "/v1/operations/"+url.PathEscape(id)+"/approve", body, &op); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "%s is %s under approval %s\n", op["id"], op["status"], op["approval_id"])
	return nil
}
