package dispatcher

import (
	"log/slog"
	"maps"
	"time"

	"github.com/sethvargo/go-retry"

	"github.com/actledger/actledger/ledger"
	"github.com/actledger/actledger/provider"
)

// This file is the dispatcher's policy: decide says what a claimed
// operation's next state is, given what just happened to it. It does no
// I/O and reads no clock: the work (and the lease sweeper) read the
// ledger, call the provider and take the time, then record what decide
// concludes.

// result is what just happened to a claimed operation, for decide to
// judge: claimedUnknown, lapsedUnsent, answered, leaseExpired or lookedUp.
type result interface{ isResult() }

// claimedUnknown: the operation was claimed from unknown; nothing has been
// asked under this claim yet.
type claimedUnknown struct{}

// lapsedUnsent: the approval or its token lapsed before a create could be
// sent under this claim.
type lapsedUnsent struct{}

// answered: a create returned, with the provider's classified answer.
type answered struct {
	class      provider.Class
	retryAfter time.Duration
	reference  string // the provider's reference of a success
	// review, when set, hands the answer to a person for this reason
	// (provider.Result.Review): the request could not be built, the
	// effect exists but cannot be named, or a rule of the provider said so.
	review ledger.ReviewReason
	// sentFrom and sentAt bound when the request may have been at the
	// provider (ledger.Change.SentFrom, SentAt); zero when nothing was
	// sent.
	sentFrom, sentAt time.Time
	evidence         map[string]any
}

// leaseExpired: a claim's lease ran out before its worker recorded an
// outcome; a call under it may have been in flight from sentFrom (the
// claim) to sentAt (the lease end).
type leaseExpired struct {
	sentFrom, sentAt time.Time
	evidence         map[string]any
}

// lookedUp: a lookup in the provider's account and environment (in),
// judged by ledger.JudgeLookup; sentTo are the others the operation went
// to, which made it untrusted.
type lookedUp struct {
	verdict   ledger.LookupVerdict
	reference string // the provider's reference of a found effect
	in        ledger.Target
	sentTo    []ledger.Target
	evidence  map[string]any
}

func (claimedUnknown) isResult() {}
func (lapsedUnsent) isResult()   {}
func (answered) isResult()       {}
func (leaseExpired) isResult()   {}
func (lookedUp) isResult()       {}

// contract is a provider's contract as decide applies it.
type contract struct {
	pc *provider.Config
	// margin is what a call's full timeout must leave of the lease
	// (Config.CallMargin): a resend decided now may be worked on at the
	// provider until now plus the timeout plus the margin.
	margin time.Duration
	// backoff is the delay before the attempt after the given one
	// (backoff, with jitter, in production).
	backoff func(p provider.RetryPolicy, attempt int) time.Duration
}

// history is what decide needs to know that is not on the operation's row;
// the caller reads it.
type history struct {
	// settling: the claim was taken from unknown, so an earlier attempt
	// may have had an effect.
	settling bool
	// lapse says whether the approval and its token still stand, as of the
	// claim or its latest confirmation (Store.CheckLapse for the sweeper).
	lapse ledger.Lapse
	// outcomeOpen: an earlier attempt's outcome is still unsettled
	// (Store.OutcomeOpen). Read only for the answers that need it (see
	// needsOutcomeOpen).
	outcomeOpen bool
}

// step is what the work does next under its claim.
type step string

// The steps after a decision. A decision that records a change stops: the
// change ends the claim, and the ledger schedules what follows. The names
// of resending and looking up are also what an unknown outcome records as
// its next_step.
const (
	stepStop   step = ""
	stepResend step = "resend_same_key" // send again now, with the same key
	stepLookup step = "lookup"          // ask the provider whether the effect exists
)

// decision is what decide concludes.
type decision struct {
	// changes are recorded in order in one transaction (unknown, then
	// review: the history keeps both); none when the state stays.
	changes []ledger.Change
	// note, when set, is an event appended with no change of state (a
	// believable absence, before the resend it allows).
	note *note
	// next is what the work does next under the same claim: stepStop
	// whenever changes are recorded.
	next step
	// log, when set, is what the worker says about it.
	log *logLine
}

// note is an event that changes no state.
type note struct {
	kind   ledger.EventKind
	detail map[string]any
}

// logLine is a log record decide asks for.
type logLine struct {
	level slog.Level
	msg   string
	args  []any
}

// decide is the dispatcher's one policy: what follows from r for operation
// op (as claimed, or as the sweeper found it) under provider contract c,
// with h from the ledger, at now. It is pure: the same inputs give the
// same decision, and its inputs are not modified.
func decide(op ledger.Operation, c contract, r result, h history, now time.Time) decision {
	p := policy{op: op, contract: c, history: h, now: now}
	switch r := r.(type) {
	case claimedUnknown:
		return p.settle()
	case lapsedUnsent:
		return p.lapsed()
	case answered:
		return p.answered(r)
	case leaseExpired:
		change := ledger.Change{
			To: ledger.StatusUnknown, Kind: ledger.EventLeaseExpired, SentAt: r.sentAt, SentFrom: r.sentFrom,
			OnlyIfLeaseExpired: true, Detail: evidenceOf(r.evidence),
		}
		return p.afterSend(false, r.sentFrom, r.sentAt).unknown(change)
	case lookedUp:
		return p.lookedUp(r)
	}
	panic("dispatcher: decide: unknown result type")
}

// needsOutcomeOpen reports whether decide reads history.outcomeOpen for a
// create answered with class: a refusal is believed only when no earlier
// attempt's outcome is open.
func needsOutcomeOpen(class provider.Class, settling bool) bool {
	return class == provider.ClassRejected || (class == provider.ClassNotExecuted && settling)
}

// policy is one call of decide: its inputs, for its helpers.
type policy struct {
	op ledger.Operation
	contract
	history
	now time.Time
}

// moves is the decision to record the changes cs and stop.
func moves(cs ...ledger.Change) decision { return decision{changes: cs} }

// settle decides how a claimed operation whose last outcome is unknown is
// settled: a resend, a lookup, or a person.
func (p policy) settle() decision {
	switch _, how := p.nextForUnknown(); how {
	case stepResend:
		return decision{next: stepResend,
			log: &logLine{slog.LevelInfo, "outcome unknown; resending with the same key inside the provider's idempotency window", nil}}
	case stepLookup:
		return decision{next: stepLookup}
	default:
		reason, why := p.noWayToSettle()
		return moves(ledger.Change{To: ledger.StatusReview, Kind: ledger.EventNeedsReview, Review: p.review(reason),
			Detail: map[string]any{"why": why}})
	}
}

// lapsed ends a claim whose approval or token lapsed before a create: an
// operation never sent with a possible effect is held (nothing happened);
// one whose earlier attempt's outcome was unknown goes to a person, as the
// lookup path does when the approval lapsed.
func (p policy) lapsed() decision {
	if !p.settling {
		// The evidence of a hold: the lapse, the account and environment
		// the call would have gone to, and that nothing was sent.
		c := ledger.Change{To: ledger.StatusHeld, Kind: ledger.EventKind(p.lapse),
			Detail: map[string]any{"lapse": p.lapse, "account": p.pc.Account, "environment": p.pc.Environment, "sent": false}}
		if p.lapse == ledger.LapseApprovalMismatch {
			c.Flag = ledger.FlagApprovalMismatch
		}
		d := moves(c)
		d.log = &logLine{slog.LevelInfo, "not sent: approval or access lapsed before anything was sent", []any{"lapse", p.lapse}}
		return d
	}
	d := moves(ledger.Change{To: ledger.StatusReview, Kind: ledger.EventKind(p.lapse), Review: p.review(ledger.ReasonLapsedUnknown),
		Detail: map[string]any{"lapse": p.lapse, "why": "the approval or its token lapsed before the resend, and an earlier attempt may have had the effect"}})
	d.log = &logLine{slog.LevelInfo, "not resent: approval or access lapsed while an earlier outcome is unsettled", []any{"lapse", p.lapse}}
	return d
}

// answered records a create's classified answer.
func (p policy) answered(r answered) decision {
	attempt := p.op.Attempts + 1
	evidence := evidenceOf(r.evidence)
	c := ledger.Change{Kind: ledger.EventAttempt, Detail: evidence, Attempted: true, SentFrom: r.sentFrom, SentAt: r.sentAt}
	if r.review != "" {
		// The answer itself says a person must look: the attempt's class
		// stays in its event (a reference_missing success is an effect
		// that exists, and is never resent).
		c.To, c.Review = ledger.StatusReview, p.review(r.review)
		d := moves(c)
		d.log = &logLine{slog.LevelWarn, "provider answer handed to a person", []any{"attempt", attempt, "reason", r.review, "class", r.class}}
		return d
	}
	switch r.class {
	case provider.ClassSucceeded:
		c.To, c.ProviderReference = ledger.StatusSucceeded, r.reference
		return moves(c)
	case provider.ClassRejected:
		// A definite refusal of a resend proves nothing about an earlier
		// attempt whose outcome was unknown, recorded or not (a lease that
		// expired counts no attempt): the resend may have been refused
		// before its key was looked at. Failed would tell the agent nothing
		// happened while the effect may exist.
		if p.outcomeOpen {
			evidence["why"] = "the provider refused a resend, but an earlier attempt's outcome is unknown and may have had the effect"
			c.To, c.Review = ledger.StatusReview, p.review(ledger.ReasonRejectedAfterUnknown)
			d := moves(c)
			d.log = &logLine{slog.LevelWarn, "resend refused after an unknown outcome; handing it to a person",
				[]any{"attempt", attempt, "http_status", evidence["http_status"]}}
			return d
		}
		c.To, c.CompensationReview = ledger.StatusFailed, p.review(ledger.ReasonCompensationFailed)
		return moves(c)
	case provider.ClassNotExecuted:
		// A resend refused before any effect says nothing about an
		// earlier attempt whose outcome is unknown: the operation is not
		// "confirmed not executed" (retry_wait, which a revoke would hold
		// as never sent). It stays unknown, the refusal's Retry-After
		// honoured before the next step.
		if p.settling && p.outcomeOpen {
			evidence["why"] = "the provider refused this resend before any effect, but an earlier attempt's outcome is still unknown"
			c.To, c.NextAttemptAt = ledger.StatusUnknown, p.now.Add(r.retryAfter)
			return p.afterSend(true, r.sentFrom, r.sentAt).unknown(c)
		}
		// The budget is judged at the time of the next attempt: a retry
		// that could only be sent after max_elapsed is not scheduled.
		next := p.now.Add(max(p.backoff(p.pc.Retry, attempt), r.retryAfter))
		if p.exhausted(attempt, c.SentAt, next) {
			c.To, c.Review = ledger.StatusReview, p.review(ledger.ReasonRetriesExhausted)
			c.CompensationReview = p.review(ledger.ReasonCompensationFailed)
			return moves(c)
		}
		c.To, c.NextAttemptAt = ledger.StatusRetryWait, next
		return moves(c)
	default: // provider.ClassUnknown
		c.To = ledger.StatusUnknown
		return p.afterSend(true, r.sentFrom, r.sentAt).unknown(c)
	}
}

// afterSend is p with the operation as a send from sentFrom to sentAt
// (none when sentAt is zero) leaves it, counting one more attempt if
// attempted: what an unknown outcome's next step is judged on.
func (p policy) afterSend(attempted bool, sentFrom, sentAt time.Time) policy {
	if attempted {
		p.op.Attempts++
	}
	if !sentAt.IsZero() {
		p.op.LastSentAt = &sentAt
		p.op.FirstSentAt = firstSentPtr(p.op, sentFrom)
	}
	return p
}

// unknown records an outcome that may have happened (c, to unknown) and
// schedules how it will be settled: a resend with the same key inside the
// idempotency window, else a lookup once "absent" is believable, else a
// person.
func (p policy) unknown(c ledger.Change) decision {
	next, how := p.nextForUnknown()
	if how == stepStop {
		// Nothing can confirm or exclude the effect: keep the truth
		// (unknown) in the history, and hand it to a person.
		c.To = ledger.StatusUnknown
		reason, why := p.noWayToSettle()
		return moves(c, ledger.Change{
			To: ledger.StatusReview, Kind: ledger.EventNeedsReview, Review: p.review(reason),
			Detail: map[string]any{"why": why},
		})
	}
	// A floor already set (a refusal's Retry-After) is kept.
	if next.After(c.NextAttemptAt) {
		c.NextAttemptAt = next
	}
	if m, ok := c.Detail.(map[string]any); ok {
		m["next_step"] = how
	}
	return moves(c)
}

// lookedUp records what a lookup established.
func (p policy) lookedUp(r lookedUp) decision {
	evidence := evidenceOf(r.evidence)
	switch r.verdict {
	case ledger.LookupUntrusted:
		d := moves(ledger.Change{To: ledger.StatusReview, Kind: ledger.EventLookupUntrusted, Review: p.review(ledger.ReasonLookupUntrusted),
			Detail: map[string]any{"sent_to": r.sentTo, "lookup_in": r.in,
				"why": "the provider's account or environment changed since the operation was sent; a lookup here proves nothing about it"}})
		d.log = &logLine{slog.LevelWarn, "lookup not trusted: the operation was sent to another account or environment",
			[]any{"sent_to", r.sentTo, "lookup_in", r.in}}
		return d
	case ledger.LookupFound:
		return moves(ledger.Change{To: ledger.StatusSucceeded, Kind: ledger.EventLookupFound, ProviderReference: r.reference, Detail: evidence})
	case ledger.LookupDuplicate:
		evidence["why"] = "the provider holds two or more effects for the operation's key"
		d := moves(ledger.Change{To: ledger.StatusReview, Kind: ledger.EventLookupDuplicate, Review: p.review(ledger.ReasonDuplicateEffect), Detail: evidence})
		d.log = &logLine{slog.LevelWarn, "lookup found more than one effect for one operation", []any{"references", evidence["references"]}}
		return d
	case ledger.LookupAbsentTooEarly:
		believable := ledger.AbsenceBelievableAt(p.op, p.pc)
		evidence["believable_at"] = believable
		return moves(ledger.Change{To: ledger.StatusUnknown, Kind: ledger.EventLookupAbsentTooEarly, NextAttemptAt: believable, Detail: evidence})
	case ledger.LookupAbsentConfirmed:
		// Absence is confirmed: nothing happened, so a resend with the
		// same key is safe, if the approval still stands.
		if p.lapse != ledger.LapseNone {
			evidence["lapse"] = p.lapse
			return moves(ledger.Change{To: ledger.StatusReview, Kind: ledger.EventLookupAbsentConfirmed, Review: p.review(ledger.ReasonLapsedUnknown), Detail: evidence})
		}
		if p.exhausted(p.op.Attempts, time.Time{}, p.now) {
			return moves(ledger.Change{To: ledger.StatusReview, Kind: ledger.EventLookupAbsentConfirmed, Review: p.review(ledger.ReasonRetriesExhausted),
				CompensationReview: p.review(ledger.ReasonCompensationFailed), Detail: evidence})
		}
		return decision{note: &note{kind: ledger.EventLookupAbsentConfirmed, detail: evidence}, next: stepResend,
			log: &logLine{slog.LevelInfo, "absence confirmed after the visibility lag; resending with the same key", nil}}
	case ledger.LookupInconclusive:
		// The supplier answered, but not with the whole truth (its
		// lookup.complete is false): no absence is believed and nothing
		// is resent. It counts against the lookups' budget like a failed
		// lookup, and is asked again after the visibility lag; a budget
		// that would end before then hands it to a person.
		next := p.now.Add(max(p.pc.Lookup.VisibilityLag.Duration, p.pc.Retry.Initial.Duration))
		if p.exhausted(p.op.RetryBase, time.Time{}, next) {
			evidence["why"] = "every lookup within the retry budget was inconclusive (the supplier said its answer was not the whole truth), so neither the effect nor its absence is established"
			d := moves(ledger.Change{To: ledger.StatusReview, Kind: ledger.EventLookupInconclusive, Review: p.review(ledger.ReasonOutcomeUnknown), Detail: evidence})
			d.log = &logLine{slog.LevelWarn, "lookups stayed inconclusive until the retry budget ended; handing it to a person", nil}
			return d
		}
		return moves(ledger.Change{To: ledger.StatusUnknown, Kind: ledger.EventLookupInconclusive, NextAttemptAt: next, Detail: evidence})
	default: // ledger.LookupFailed
		if p.exhausted(p.op.RetryBase, time.Time{}, p.now) {
			return moves(ledger.Change{To: ledger.StatusReview, Kind: ledger.EventLookupFailed, Review: p.review(ledger.ReasonLookupFailing), Detail: evidence})
		}
		return moves(ledger.Change{To: ledger.StatusUnknown, Kind: ledger.EventLookupFailed, NextAttemptAt: p.now.Add(p.pc.Retry.Max.Duration), Detail: evidence})
	}
}

// nextForUnknown says when and how an unknown outcome is worked on next;
// how is stepStop when no automatic way exists. The provider's idempotency
// contract comes first: inside its retention a resend with the same key is
// answered with the stored result, and it needs no visibility lag. Past
// retention, after the approval lapsed (nothing may be sent) or with the
// retry budget spent, a lookup is the only way left.
func (p policy) nextForUnknown() (time.Time, step) {
	if p.mayResend() {
		return p.now.Add(p.backoff(p.pc.Retry, p.op.Attempts)), stepResend
	}
	if p.pc.Lookup != nil {
		at := p.now
		if believable := ledger.AbsenceBelievableAt(p.op, p.pc); believable.After(p.now) {
			at = believable
		}
		return at, stepLookup
	}
	return time.Time{}, stepStop
}

// mayResend reports whether the provider's idempotency contract covers a
// resend of the operation with its key now.
func (p policy) mayResend() bool {
	return p.lapse == ledger.LapseNone && p.keyRetained() && !p.exhausted(p.op.Attempts, time.Time{}, p.now)
}

// keyRetained reports whether the provider still knows the operation's key
// for a resend decided now wherever that resend lands: a request may reach
// the provider, and be worked on, until the call's full timeout (plus the
// margin before it starts) has passed. A resend that lands after retention
// would be a new request to the provider, a second effect if the first
// landed; a lookup settles the outcome instead.
func (p policy) keyRetained() bool {
	return p.op.FirstSentAt != nil && p.pc.IdempotencyValid(*p.op.FirstSentAt, p.now.Add(p.pc.Timeout.Duration+p.margin))
}

// noWayToSettle says why an unknown outcome goes to a person.
func (p policy) noWayToSettle() (reason ledger.ReviewReason, why string) {
	switch {
	case p.lapse != ledger.LapseNone:
		return ledger.ReasonLapsedUnknown, "the approval or its token lapsed, so nothing may be resent, and the provider has no lookup"
	case p.keyRetained():
		return ledger.ReasonRetriesExhausted, "the retry budget is spent and the provider has no lookup"
	default:
		return ledger.ReasonOutcomeUnknown, "the provider has no lookup, and no idempotency key within its retention covers a resend"
	}
}

// exhausted reports whether the retry budget is spent after attempts
// attempts: the provider's max_attempts and max_elapsed count from the
// first send, or from an operator's retry, whichever is later.
func (p policy) exhausted(attempts int, sentAt, now time.Time) bool {
	start := sentAt
	if p.op.FirstSentAt != nil {
		start = *p.op.FirstSentAt
	}
	if p.op.RetrySince != nil && p.op.RetrySince.After(start) {
		start = *p.op.RetrySince
	}
	return p.pc.Retry.Exhausted(attempts-p.op.RetryBase, start, now)
}

// review is a hand-over to the provider's review owner, due by its
// deadline.
func (p policy) review(reason ledger.ReviewReason) *ledger.Review {
	return &ledger.Review{Reason: reason, Owner: p.pc.Review.Owner, Deadline: p.now.Add(p.pc.Review.Deadline.Duration)}
}

// evidenceOf is a copy of e that decide may add to: its input stays as it
// was.
func evidenceOf(e map[string]any) map[string]any {
	if e == nil {
		return map[string]any{}
	}
	return maps.Clone(e)
}

// backoff is the delay before the attempt after attempt (counting from 1):
// exponential from the policy's initial delay, capped, with 10% jitter so
// retries of many operations do not arrive together.
func backoff(p provider.RetryPolicy, attempt int) time.Duration {
	b := retry.WithJitterPercent(10, retry.WithCappedDuration(p.Max.Duration, retry.NewExponential(p.Initial.Duration)))
	var d time.Duration
	for range max(attempt, 1) {
		d, _ = b.Next()
	}
	return d
}

func firstSentPtr(op ledger.Operation, sentAt time.Time) *time.Time {
	if op.FirstSentAt != nil {
		return op.FirstSentAt
	}
	return &sentAt
}
