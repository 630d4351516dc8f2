package ledger

// ReviewReason says why an operation (or a piece of unmatched evidence)
// waits for a person. It is stored in operations.review_reason, shown in the
// API and the console, and is the last token of the review stream's subject
// (ACTLEDGER.review.<tenant id>.<reason>), so a reviewer can subscribe to one
// kind. docs/operators.md lists the same set for operators.
type ReviewReason string

// The review reasons. The dispatcher gives the first six, the reconciler
// the next three, a statement run the two after; unmatched evidence has
// its own.
const (
	// ReasonRetriesExhausted: the provider's retry budget (max_attempts,
	// max_elapsed) ran out without a success, or a believable lookup found
	// nothing after the last attempt the budget allowed.
	ReasonRetriesExhausted ReviewReason = "retries_exhausted"
	// ReasonOutcomeUnknown: an attempt's outcome is unknown and nothing
	// can settle it automatically (no lookup, no idempotency window).
	ReasonOutcomeUnknown ReviewReason = "outcome_unknown"
	// ReasonLookupFailing: the lookups that should settle an unknown
	// outcome keep failing.
	ReasonLookupFailing ReviewReason = "lookup_failing"
	// ReasonLapsedUnknown: the approval or the requesting token lapsed
	// while an attempt's outcome was unknown, so it may not be resent and
	// its effect is not known.
	ReasonLapsedUnknown ReviewReason = "approval_lapsed_outcome_unknown"
	// ReasonLookupUntrusted: the operation was sent to another provider
	// account or environment than the one a lookup would ask now.
	ReasonLookupUntrusted ReviewReason = "lookup_untrusted"
	// ReasonRejectedAfterUnknown: the provider definitely refused a
	// resend, but an earlier attempt's outcome was unknown and nothing
	// has excluded its effect; the refusal says nothing about it (the
	// resend may have been refused before its key was looked at).
	ReasonRejectedAfterUnknown ReviewReason = "rejected_after_unknown"
	// ReasonProviderConfigError: the create request cannot be built for
	// the operation's params (an expression of the providers file fails on
	// them); nothing was sent.
	ReasonProviderConfigError ReviewReason = "provider_config_error"
	// ReasonProviderOutcome: one of the provider's own error meanings
	// (outcomes, outcome review) hands the answer to a person.
	ReasonProviderOutcome ReviewReason = "provider_outcome"
	// ReasonReferenceMissing: the provider confirmed the effect (2xx) but
	// its reference cannot be read from the answer: the effect exists and
	// is never resent; a person names it.
	ReasonReferenceMissing ReviewReason = "reference_missing"
	// ReasonCompensationFailed: the operation created to undo or correct
	// this one failed (rejected, or its retries exhausted), so the effect
	// it meant to correct stands.
	ReasonCompensationFailed ReviewReason = "compensation_failed"

	// ReasonDuplicateEffect: one operation matched two provider effects.
	ReasonDuplicateEffect ReviewReason = "duplicate_effect"
	// ReasonEvidenceMismatch: evidence of the effect disagrees with what
	// was approved (amounts, quantities).
	ReasonEvidenceMismatch ReviewReason = "evidence_mismatch"
	// ReasonConflictingEvidence: pieces of evidence about one operation
	// contradict each other.
	ReasonConflictingEvidence ReviewReason = "conflicting_evidence"

	// ReasonEffectMismatch: the supplier's statement lists the effect, and
	// its record disagrees with what was approved (the provider's
	// reconcile.match is false).
	ReasonEffectMismatch ReviewReason = "effect_mismatch"
	// ReasonEffectMissing: the operation succeeded inside a window the
	// supplier's statement was read for in full, and no record names it.
	ReasonEffectMissing ReviewReason = "effect_missing"

	// ReasonUnmatchedEvidence: evidence of a provider effect that no
	// operation explains.
	ReasonUnmatchedEvidence ReviewReason = "unmatched_evidence"
)

// ReviewReasons lists every review reason, in the order above.
var ReviewReasons = []ReviewReason{
	ReasonRetriesExhausted, ReasonOutcomeUnknown, ReasonLookupFailing, ReasonLapsedUnknown,
	ReasonLookupUntrusted, ReasonRejectedAfterUnknown,
	ReasonProviderConfigError, ReasonProviderOutcome, ReasonReferenceMissing, ReasonCompensationFailed,
	ReasonDuplicateEffect, ReasonEvidenceMismatch, ReasonConflictingEvidence,
	ReasonEffectMismatch, ReasonEffectMissing,
	ReasonUnmatchedEvidence,
}
