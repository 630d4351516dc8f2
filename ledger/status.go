package ledger

import (
	"fmt"
	"strings"
)

// Status is an operation's state. The values are stored in
// operations.status, whose CHECK constraint lists the same set.
type Status string

// The states of the product contract. See docs/states.md (generated from
// Transitions by TestStatesDocMatchesTransitionTable) for the table.
const (
	// StatusAwaitingApproval: proposed by an agent; waits for a person or
	// a policy to approve it. It has no approval and no outbox row, so
	// nothing can send it.
	StatusAwaitingApproval Status = "awaiting_approval"
	// StatusQueued: accepted and stored with its outbox row; never sent.
	StatusQueued Status = "queued"
	// StatusDispatching: claimed by one worker under a lease; a provider
	// call may be in flight, so nobody else may call.
	StatusDispatching Status = "dispatching"
	// StatusRetryWait: confirmed not executed; the next attempt is scheduled.
	StatusRetryWait Status = "retry_wait"
	// StatusUnknown: a request may have reached the provider and no
	// confirmation came back. Never resent blindly.
	StatusUnknown Status = "unknown"
	// StatusSucceeded: the provider confirmed the effect.
	StatusSucceeded Status = "succeeded"
	// StatusFailed: the provider confirmed a rejection with no effect.
	StatusFailed Status = "failed"
	// StatusHeld: the approval or the requesting token lapsed before
	// anything was sent.
	StatusHeld Status = "held"
	// StatusReview: a person must decide; reason, owner and deadline are set.
	StatusReview Status = "review"
	// StatusCancelled: ended by an operator, or a proposal a person
	// declined.
	StatusCancelled Status = "cancelled"
)

// Statuses lists every state in the contract's order.
var Statuses = []Status{
	StatusAwaitingApproval, StatusQueued, StatusDispatching, StatusRetryWait, StatusUnknown, StatusSucceeded,
	StatusFailed, StatusHeld, StatusReview, StatusCancelled,
}

// Transitions is the one transition table: for each state, the states it
// may move to. Transition refuses anything else, and the docs are checked
// against it. Evidence of success (a webhook, a lookup) may settle any
// state that never confirmed an outcome, which is why so many states lead to
// succeeded.
var Transitions = map[Status][]Status{
	// A proposal is approved (queued, with its approval and outbox row),
	// declined (cancelled) or lapses (held: the request expired, the
	// requesting token or the approval was revoked); it is never sent.
	StatusAwaitingApproval: {StatusQueued, StatusCancelled, StatusHeld},
	// Queued and retry_wait also lead to unknown: after the ledger lost
	// its latest changes (a failover to an asynchronous replica, a
	// restore), an operation it shows unsent may have been sent by the
	// ledger it lost, and recovery (Store.Recover) says so.
	StatusQueued:      {StatusDispatching, StatusHeld, StatusSucceeded, StatusReview, StatusCancelled, StatusUnknown},
	StatusDispatching: {StatusSucceeded, StatusFailed, StatusRetryWait, StatusUnknown, StatusHeld, StatusReview, StatusQueued},
	StatusRetryWait:   {StatusDispatching, StatusHeld, StatusSucceeded, StatusReview, StatusCancelled, StatusUnknown},
	StatusUnknown:     {StatusDispatching, StatusSucceeded, StatusFailed, StatusReview, StatusCancelled},
	StatusSucceeded:   {StatusReview},
	StatusFailed:      {StatusQueued, StatusSucceeded, StatusReview},
	StatusHeld:        {StatusSucceeded, StatusReview, StatusCancelled},
	StatusReview:      {StatusSucceeded, StatusFailed, StatusCancelled, StatusQueued, StatusReview},
	StatusCancelled:   {},
}

// Valid reports whether s is one of the contract's states.
func (s Status) Valid() bool {
	_, ok := Transitions[s]
	return ok
}

// CanMoveTo reports whether the transition table allows s → to.
func (s Status) CanMoveTo(to Status) bool {
	for _, next := range Transitions[s] {
		if next == to {
			return true
		}
	}
	return false
}

// Terminal reports whether nothing will happen to an operation in s without
// new evidence or an operator.
func (s Status) Terminal() bool {
	switch s {
	case StatusSucceeded, StatusFailed, StatusHeld, StatusCancelled:
		return true
	}
	return false
}

// MayWriteToProvider says what the contract allows a state to send, in the
// words of the contract's table.
func (s Status) MayWriteToProvider() string {
	switch s {
	case StatusAwaitingApproval:
		return "no, until approved"
	case StatusQueued:
		return "yes, after a claim"
	case StatusDispatching:
		return "no second call"
	case StatusRetryWait:
		return "yes, same external key, after backoff"
	case StatusUnknown:
		return "only after a lookup establishes absence, or within the provider's idempotency retention"
	case StatusSucceeded:
		return "never again"
	case StatusReview:
		return "no, until resolved"
	default:
		return "no"
	}
}

// Summary is the one plain sentence shown to an agent and its user. It never
// claims more than the ledger knows: an unknown outcome must not read as a
// failure that invites a retry.
func (s Status) Summary(action string) string {
	switch s {
	case StatusAwaitingApproval:
		return fmt.Sprintf("The %s request waits for a person to approve it; nothing has been sent.", action)
	case StatusQueued:
		return fmt.Sprintf("The %s request is approved and queued; it has not been sent yet.", action)
	case StatusDispatching:
		return fmt.Sprintf("The %s request is being sent to the provider now; do not repeat it.", action)
	case StatusRetryWait:
		return fmt.Sprintf("The provider did not carry out %s yet (it asked to try later); actledger will retry it, do not repeat it.", action)
	case StatusUnknown:
		return fmt.Sprintf("The %s may already have happened; do not repeat it. actledger is confirming the outcome with the provider.", action)
	case StatusSucceeded:
		return fmt.Sprintf("The provider confirmed that %s happened.", action)
	case StatusFailed:
		return fmt.Sprintf("The provider refused %s and nothing happened; a corrected request needs a new approval.", action)
	case StatusHeld:
		return fmt.Sprintf("The %s was not sent because its approval or access expired or was revoked; nothing happened.", action)
	case StatusReview:
		return fmt.Sprintf("The outcome of %s needs a person to check it; do not repeat it.", action)
	case StatusCancelled:
		return fmt.Sprintf("An operator cancelled %s; nothing more will be sent.", action)
	}
	return "The state of this request is not known to actledger."
}

// StatesMarkdown renders the states and the transition table as the
// Markdown of docs/states.md, so the docs can never drift from the code.
func StatesMarkdown() string {
	var b strings.Builder
	b.WriteString("# Operation states\n\n")
	b.WriteString("Generated from `ledger.Transitions` (`go test ./ledger -run StatesDoc -update`); do not edit by hand.\n")
	b.WriteString("Every change is a conditional update on the operation's `version` plus an append-only event.\n\n")
	b.WriteString("| state | may the system write to the provider? | may move to |\n|---|---|---|\n")
	for _, s := range Statuses {
		next := make([]string, len(Transitions[s]))
		for i, to := range Transitions[s] {
			next[i] = "`" + string(to) + "`"
		}
		moves := strings.Join(next, ", ")
		if moves == "" {
			moves = "— (final)"
		}
		fmt.Fprintf(&b, "| `%s` | %s | %s |\n", s, s.MayWriteToProvider(), moves)
	}
	b.WriteString("\n## What the agent is told\n\n| state | summary |\n|---|---|\n")
	for _, s := range Statuses {
		fmt.Fprintf(&b, "| `%s` | %s |\n", s, s.Summary("<action>"))
	}
	b.WriteString("\nA decided or lapsed proposal says what happened to it instead:\n\n| state | flag | summary |\n|---|---|---|\n")
	for _, f := range proposalFlags {
		op := Operation{Action: "<action>", Status: f.status, Flags: []string{f.flag}, DecisionReason: &f.example}
		fmt.Fprintf(&b, "| `%s` | `%s` | %s |\n", f.status, f.flag, op.Summary())
	}
	return b.String()
}

// Flags that mark how a proposal ended, for its summary.
const (
	// FlagApprovalDenied: a person declined the proposal (cancelled).
	FlagApprovalDenied = "approval_denied"
	// FlagApprovalRequestExpired: nobody decided before the action's
	// request_ttl (held).
	FlagApprovalRequestExpired = "approval_request_expired"
	// FlagApprovalMismatch: the action now points at another provider
	// account or environment than its approval was granted for (held
	// before any call).
	FlagApprovalMismatch = "approval_mismatch"
)

// FlagLateSuccess marks a success that arrived after the approval expired or
// was revoked: the truth is recorded, and nothing is dispatched again.
const FlagLateSuccess = "late_success_after_expiry"

// proposalFlags lists the flagged summaries for docs/states.md.
var proposalFlags = []struct {
	status  Status
	flag    string
	example string
}{
	{StatusCancelled, FlagApprovalDenied, "<reason>"},
	{StatusHeld, FlagApprovalRequestExpired, ""},
	{StatusHeld, FlagApprovalMismatch, ""},
}

// Summary is the operation's one plain sentence: its state's, unless the
// operation is a proposal that was declined or lapsed, which says so.
func (op Operation) Summary() string {
	for _, f := range op.Flags {
		switch {
		case f == FlagApprovalDenied && op.Status == StatusCancelled:
			reason := ""
			if op.DecisionReason != nil && *op.DecisionReason != "" {
				reason = " (" + *op.DecisionReason + ")"
			}
			return fmt.Sprintf("A person declined the %s request%s; nothing was sent.", op.Action, reason)
		case f == FlagApprovalRequestExpired && op.Status == StatusHeld:
			return fmt.Sprintf("Nobody approved the %s request in time, so it expired; nothing was sent.", op.Action)
		case f == FlagApprovalMismatch && op.Status == StatusHeld:
			return fmt.Sprintf("The %s was not sent because the provider account or environment it would go to is not the one its approval was granted for; nothing happened.", op.Action)
		}
	}
	return op.Status.Summary(op.Action)
}
