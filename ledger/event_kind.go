package ledger

// EventKind names an entry of an operation's history (operation_events.kind).
// Every kind the code writes is named here once: the ones readers branch on
// (the judgement of a history, Judge, and the statement that tells whether
// an earlier attempt's effect is still open, operationOutcomeOpen, which
// must read a history the same way), and the ones people read. A hold
// because an approval or token lapsed is recorded under the Lapse's own
// name (EventKind(lapse)).
type EventKind string

// Event kinds that readers branch on.
const (
	// EventAttempt: a provider call's answer; its detail's "class" says
	// whether it may have had an effect.
	EventAttempt EventKind = "attempt"
	// EventEvidence: a webhook, a lookup applied by the reconciler, or an
	// operator's word; its detail's "status" is an EvidenceStatus.
	EventEvidence EventKind = "evidence"
	// EventReconciled: a record of the supplier's statement, applied as
	// evidence; its detail's "status" is an EvidenceStatus, as an
	// EventEvidence's.
	EventReconciled EventKind = "reconciled"
	// EventStaleResult: a success a fenced worker saw after it lost its
	// claim.
	EventStaleResult EventKind = "stale_result"
	// EventLeaseExpired: a worker's claim ran out; its call may or may not
	// have happened.
	EventLeaseExpired EventKind = "lease_expired"
	// EventLookupFound: a lookup found the effect.
	EventLookupFound EventKind = "lookup_found"
	// EventCircuitWait: a claimed operation was not sent because its
	// provider's circuit opened meanwhile; it waits for the probe in
	// retry_wait, no attempt spent.
	EventCircuitWait EventKind = "circuit_wait"
	// EventLookupDuplicate: a lookup found two or more effects for the
	// operation's key.
	EventLookupDuplicate EventKind = "lookup_duplicate"
	// EventLookupAbsentConfirmed: a believable lookup found nothing after
	// the last send.
	EventLookupAbsentConfirmed EventKind = "lookup_absent_confirmed"
	// EventReplayLookupAbsent: a replay's believable lookup found nothing.
	EventReplayLookupAbsent EventKind = "replay_lookup_absent"
	// EventLookupAbsentTooEarly: a lookup found nothing, too soon after
	// the last send for that to mean anything.
	EventLookupAbsentTooEarly EventKind = "lookup_absent_too_early"
	// EventLookupFailed: the lookup itself failed.
	EventLookupFailed EventKind = "lookup_failed"
	// EventLookupInconclusive: the provider answered the lookup, but its
	// lookup.complete said the answer is not the whole truth: neither
	// found nor absent.
	EventLookupInconclusive EventKind = "lookup_inconclusive"
	// EventRedispatched: the stuck-dispatch sweeper published the
	// operation's dispatch message again; a note, not a state change.
	EventRedispatched EventKind = "redispatched"
	// EventLedgerRecovery: an operator's recovery after the ledger lost
	// its latest changes (Store.Recover) made the operation unknown: the
	// ledger it lost may have sent it. It reads as an attempt that may
	// have had an effect, until a lookup excludes it.
	EventLedgerRecovery EventKind = "ledger_recovery"
	// EventKeyConflict: a request reused an operation's key with other
	// params; nothing was created or sent.
	EventKeyConflict EventKind = "key_conflict"
)

// Event kinds of the lifecycle, written by the ledger's users.
const (
	// EventCreated: the operation was stored (by enqueue_operation, or a
	// proposal).
	EventCreated EventKind = "created"
	// EventClaimed: a worker took the operation for one lease.
	EventClaimed EventKind = "claimed"
	// EventApproved: a person or a policy approved a proposal.
	EventApproved EventKind = "approved"
	// EventDenied: a person declined a proposal.
	EventDenied EventKind = "denied"
	// EventApprovalRequestExpired: nobody decided a proposal within its
	// request_ttl.
	EventApprovalRequestExpired EventKind = "approval_request_expired"
	// EventApproverTokenRevoked: the token that approved the operation was
	// revoked before it was sent.
	EventApproverTokenRevoked EventKind = "approver_token_revoked"
	// EventNeedsReview: nothing can settle an unknown outcome without a
	// person.
	EventNeedsReview EventKind = "needs_review"
	// EventLookupUntrusted: a lookup would ask another account or
	// environment than the operation was sent to.
	EventLookupUntrusted EventKind = "lookup_untrusted"
	// EventResolved: an operator settled the operation.
	EventResolved EventKind = "resolved"
	// EventOperatorRetry: an operator sent the operation again with its
	// key.
	EventOperatorRetry EventKind = "operator_retry"
	// EventCompensationFor: the operation was created to compensate
	// another (detail: operation_id).
	EventCompensationFor EventKind = "compensation_for"
	// EventCompensationFailed: the compensation of the operation failed
	// (rejected, or its retries exhausted); its detail names it.
	EventCompensationFailed EventKind = "compensation_failed"
)
