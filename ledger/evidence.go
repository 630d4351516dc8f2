package ledger

// The vocabulary of evidence: what a piece of evidence is, what it says
// happened at the provider, and what applying it did to the ledger.

// EvidenceKind says which table an evidence message's row is in.
type EvidenceKind string

// Kinds of evidence messages.
const (
	// EvidenceWebhook names a webhook_events row.
	EvidenceWebhook EvidenceKind = "webhook"
	// EvidenceStaleResult names a stale_results row: a success that a
	// fenced worker saw.
	EvidenceStaleResult EvidenceKind = "stale_result"
)

// EvidenceStatus is what a piece of evidence says happened at the provider.
// webhook_events.status holds it (a CHECK constraint lists the same set),
// as do unmatched evidence and the "status" of an "evidence" event.
type EvidenceStatus string

// Evidence statuses.
const (
	// EvidenceSucceeded: the provider has the effect.
	EvidenceSucceeded EvidenceStatus = "succeeded"
	// EvidenceFailed: the provider refused or undid it.
	EvidenceFailed EvidenceStatus = "failed"
	// EvidenceIgnored: a webhook that says nothing actledger acts on (its
	// provider's outcome expression gave "ignore"). Stored, so a
	// redelivery is recognised, and applied as it is stored: it changes
	// nothing.
	EvidenceIgnored EvidenceStatus = "ignored"
)

// EvidenceOutcome says what applying a piece of evidence did. The
// reconciler returns it and stores it with the applied row
// (webhook_events.outcome, stale_results.outcome), so a redelivered message
// reports what the first application did.
type EvidenceOutcome string

// Evidence outcomes.
const (
	// OutcomeSettledSucceeded: the operation became succeeded.
	OutcomeSettledSucceeded EvidenceOutcome = "settled_succeeded"
	// OutcomeSettledFailed: the operation became failed.
	OutcomeSettledFailed EvidenceOutcome = "settled_failed"
	// OutcomeNoChange: the evidence agrees with what the ledger holds.
	OutcomeNoChange EvidenceOutcome = "no_change"
	// OutcomeReview: the evidence sent the operation to a person.
	OutcomeReview EvidenceOutcome = "review"
	// OutcomeUnmatched: no operation explains the evidence; it is an
	// unmatched-evidence review item.
	OutcomeUnmatched EvidenceOutcome = "unmatched"
	// OutcomeRecorded: the evidence was kept as an event only.
	OutcomeRecorded EvidenceOutcome = "recorded"
)
