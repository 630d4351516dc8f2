package ledger

// EventKind names an entry of an operation's history (operation_events.kind).
// Writers name what happened ("claimed", "provider_answered", the Lapse that
// held an operation, …); the constants below are the kinds that readers
// branch on: the reconciler's judgement of a history (reconciler.judge) and
// the statement that tells whether an earlier attempt's effect is still open
// (operationOutcomeOpen), which must read a history the same way.
type EventKind string

// Event kinds that readers branch on.
const (
	// EventAttempt: a provider call's answer; its detail's "class" says
	// whether it may have had an effect.
	EventAttempt EventKind = "attempt"
	// EventEvidence: a webhook, a lookup applied by the reconciler, or an
	// operator's word; its detail's "status" is an EvidenceStatus.
	EventEvidence EventKind = "evidence"
	// EventStaleResult: a success a fenced worker saw after it lost its
	// claim.
	EventStaleResult EventKind = "stale_result"
	// EventLeaseExpired: a worker's claim ran out; its call may or may not
	// have happened.
	EventLeaseExpired EventKind = "lease_expired"
	// EventLookupFound: a lookup found the effect.
	EventLookupFound EventKind = "lookup_found"
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
	// EventRedispatched: the stuck-dispatch sweeper published the
	// operation's dispatch message again; a note, not a state change.
	EventRedispatched EventKind = "redispatched"
)
