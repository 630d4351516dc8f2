package dispatcher

import (
	"fmt"
	"maps"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/actledger/actledger/ledger"
	"github.com/actledger/actledger/provider"
)

// now is the clock decide is given in these tests.
var now = time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)

// steady is a backoff without jitter, so that decisions are exact: the
// attempt number in initial delays.
func steady(p provider.RetryPolicy, attempt int) time.Duration {
	return time.Duration(max(attempt, 1)) * p.Initial.Duration
}

// The ways a provider's contract lets an unknown outcome be settled.
const (
	byKey       = "key"        // an idempotency key retained 24h
	byLookup    = "lookup"     // a lookup with a visibility lag of 2s
	byKeyLookup = "key+lookup" // both
	byNeither   = "neither"
)

// contractFor is a provider with a 2s timeout, a call margin of 1s,
// max_attempts 3 with 1s initial backoff, max_elapsed 48h (longer than the
// key's retention, so that the two can be told apart), and the given ways
// to settle.
func contractFor(path string) contract {
	pc := &provider.Config{
		Name: "acme", Account: "acct_1", Environment: "test",
		Timeout: provider.Duration{Duration: 2 * time.Second},
		Retry: provider.RetryPolicy{MaxAttempts: 3, Initial: provider.Duration{Duration: time.Second},
			Max: provider.Duration{Duration: 5 * time.Second}, MaxElapsed: provider.Duration{Duration: 48 * time.Hour}},
		Review: provider.ReviewPolicy{Owner: "supply-ops", Deadline: provider.Duration{Duration: 4 * time.Hour}},
	}
	if path == byKey || path == byKeyLookup {
		pc.Idempotency = &provider.Idempotency{Header: "Idempotency-Key", Retention: provider.Duration{Duration: 24 * time.Hour}}
	}
	if path == byLookup || path == byKeyLookup {
		pc.Lookup = &provider.Lookup{Path: "/v1/orders?ref={reference}", VisibilityLag: provider.Duration{Duration: 2 * time.Second}}
	}
	return contract{pc: pc, margin: time.Second, backoff: steady}
}

// sentOp is a claimed operation after attempts attempts, first sent
// firstAgo and last sent lastAgo before now.
func sentOp(attempts int, firstAgo, lastAgo time.Duration) ledger.Operation {
	first, last := now.Add(-firstAgo), now.Add(-lastAgo)
	return ledger.Operation{Status: ledger.StatusDispatching, Attempts: attempts, FirstSentAt: &first, LastSentAt: &last}
}

// The operations decide is asked about.
var (
	unsent      = ledger.Operation{Status: ledger.StatusDispatching}
	sentHourAgo = sentOp(1, time.Hour, time.Hour)
	sentDayAgo  = sentOp(1, 25*time.Hour, 25*time.Hour) // past the key's retention
	// The next answer is the last the budget (3 attempts) allows.
	lastOfBudget       = sentOp(2, time.Hour, time.Hour)
	lastOfBudgetDayAgo = sentOp(2, 25*time.Hour, 25*time.Hour)
	spent              = sentOp(3, time.Hour, time.Second) // no attempt left
	// A resend decided now may be worked on until now+3s (timeout and
	// margin): inside retention, or after it.
	retainedWhereverItLands = sentOp(1, 24*time.Hour-4*time.Second, time.Hour)
	retainedOnlyNow         = sentOp(1, 24*time.Hour-2*time.Second, time.Hour)
	lastSentSecondAgo       = sentOp(1, time.Hour, time.Second)
	// The next attempt, 2s from now, starts after max_elapsed (48h), or
	// just before it.
	nextAfterMaxElapsed  = sentOp(1, 48*time.Hour-500*time.Millisecond, time.Hour)
	nextBeforeMaxElapsed = sentOp(1, 48*time.Hour-5*time.Second, time.Hour)
	failingForTwoDays    = sentOp(1, 49*time.Hour, time.Second)
)

// answer is a create answered with class, sent from 2s ago until now.
func answer(class provider.Class) answered {
	a := answered{class: class, sentFrom: now.Add(-2 * time.Second), sentAt: now, evidence: map[string]any{"class": class}}
	if class == provider.ClassSucceeded {
		a.reference = "ord_1"
	}
	return a
}

// refused is a create refused before it was sent (429, connection
// refused), with the provider's Retry-After.
func refused(retryAfter time.Duration) answered {
	return answered{class: provider.ClassNotExecuted, retryAfter: retryAfter, evidence: map[string]any{"class": provider.ClassNotExecuted}}
}

// expiry is a lease that ran out 1s ago, 30s after its claim.
var expiry = leaseExpired{sentFrom: now.Add(-30 * time.Second), sentAt: now.Add(-time.Second), evidence: map[string]any{"lease_owner": "w1"}}

// looked is a lookup in acct_1/test with verdict v.
func looked(v ledger.LookupVerdict) lookedUp {
	l := lookedUp{verdict: v, in: ledger.Target{Account: "acct_1", Environment: "test"}, evidence: map[string]any{"lookup": v}}
	switch v {
	case ledger.LookupUntrusted:
		l.sentTo, l.evidence = []ledger.Target{{Account: "acct_old", Environment: "test"}}, nil
	case ledger.LookupFound:
		l.reference = "ord_1"
	}
	return l
}

// What the ledger says beyond the operation's row.
var (
	fromQueued      = history{}
	fromQueuedOpen  = history{outcomeOpen: true} // e.g. an operator's retry of an unknown outcome
	settling        = history{settling: true}
	settlingOpen    = history{settling: true, outcomeOpen: true}
	revoked         = history{lapse: ledger.LapseApprovalRevoked}
	mismatched      = history{lapse: ledger.LapseApprovalMismatch}
	settlingRevoked = history{settling: true, lapse: ledger.LapseApprovalRevoked}
)

// describe reads a decision the way the table states it: each change as
// "event→state(review reason) at +delay next_step=…", a note, and the
// work's next step under its claim.
func describe(d decision) string {
	var parts []string
	if d.note != nil {
		parts = append(parts, "note "+string(d.note.kind))
	}
	for _, c := range d.changes {
		s := string(c.Kind) + "→" + string(c.To)
		if c.Review != nil {
			s += "(" + string(c.Review.Reason) + ")"
		}
		if !c.NextAttemptAt.IsZero() {
			s += " at +" + c.NextAttemptAt.Sub(now).String()
		}
		if m, ok := c.Detail.(map[string]any); ok && m["next_step"] != nil {
			s += fmt.Sprintf(" next_step=%v", m["next_step"])
		}
		if c.Flag != "" {
			s += " flag=" + c.Flag
		}
		parts = append(parts, s)
	}
	if d.next != stepStop {
		parts = append(parts, string(d.next)+" now")
	}
	return strings.Join(parts, "; ")
}

// TestDecideSettlesEachOutcomeByClassPathRetentionAndBudget is the
// dispatcher's policy as one table, the way the transition table is one:
// a create's answer by class, an expired lease, a claim from unknown, a
// lapse and a lookup's verdict, against the ways the provider offers to
// settle an unknown outcome (key, lookup, neither), the key's retention
// and the retry budget.
func TestDecideSettlesEachOutcomeByClassPathRetentionAndBudget(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		path string
		op   ledger.Operation
		r    result
		h    history
		want string
	}{
		// A success or a definite rejection ends the operation.
		{"success is recorded", byKey, unsent, answer(provider.ClassSucceeded), fromQueued, "attempt→succeeded"},
		{"success of a resend is recorded", byNeither, sentHourAgo, answer(provider.ClassSucceeded), settling, "attempt→succeeded"},
		{"rejection with nothing open is failed", byKey, unsent, answer(provider.ClassRejected), fromQueued, "attempt→failed"},
		{"rejection of a resend after an unknown outcome goes to a person", byKey, sentHourAgo, answer(provider.ClassRejected), settlingOpen, "attempt→review(rejected_after_unknown)"},
		{"rejection after an operator's retry of an unknown outcome goes to a person", byLookup, sentHourAgo, answer(provider.ClassRejected), fromQueuedOpen, "attempt→review(rejected_after_unknown)"},
		{"rejection of a resend whose earlier outcome was settled absent is failed", byLookup, sentHourAgo, answer(provider.ClassRejected), settling, "attempt→failed"},

		// Not executed: retried after the backoff, or its Retry-After.
		{"not executed is retried after the backoff", byNeither, unsent, refused(0), fromQueued, "attempt→retry_wait at +1s"},
		{"not executed waits for a longer Retry-After", byKey, unsent, refused(10 * time.Second), fromQueued, "attempt→retry_wait at +10s"},
		{"not executed with the budget spent goes to a person", byKey, lastOfBudget, refused(0), fromQueued, "attempt→review(retries_exhausted)"},
		{"not executed whose retry would start after max_elapsed goes to a person", byNeither, nextAfterMaxElapsed, refused(0), fromQueued, "attempt→review(retries_exhausted)"},
		{"not executed whose retry starts before max_elapsed is retried", byNeither, nextBeforeMaxElapsed, refused(0), fromQueued, "attempt→retry_wait at +2s"},
		{"not executed resend with the earlier outcome settled is retried", byKey, sentHourAgo, refused(0), settling, "attempt→retry_wait at +2s"},
		{"not executed resend after an unknown outcome stays unknown and is resent under the key", byKey, sentHourAgo, refused(0), settlingOpen, "attempt→unknown at +2s next_step=resend_same_key"},
		{"not executed resend after an unknown outcome honours Retry-After", byKey, sentHourAgo, refused(10 * time.Second), settlingOpen, "attempt→unknown at +10s next_step=resend_same_key"},
		{"not executed resend after an unknown outcome past retention is looked up", byKeyLookup, sentDayAgo, refused(10 * time.Second), settlingOpen, "attempt→unknown at +10s next_step=lookup"},
		{"not executed last resend after an unknown outcome goes to a person", byKey, lastOfBudget, refused(0), settlingOpen, "attempt→unknown at +0s; needs_review→review(retries_exhausted)"},

		// Unknown, settled by the key.
		{"unknown first answer is resent under the key", byKey, unsent, answer(provider.ClassUnknown), fromQueued, "attempt→unknown at +1s next_step=resend_same_key"},
		{"unknown inside retention is resent under the key", byKey, sentHourAgo, answer(provider.ClassUnknown), settling, "attempt→unknown at +2s next_step=resend_same_key"},
		{"unknown whose resend lands inside retention is resent", byKey, retainedWhereverItLands, answer(provider.ClassUnknown), settling, "attempt→unknown at +2s next_step=resend_same_key"},
		{"unknown whose resend could land after retention is not resent", byKey, retainedOnlyNow, answer(provider.ClassUnknown), settling, "attempt→unknown; needs_review→review(outcome_unknown)"},
		{"unknown past retention without lookup goes to a person", byKey, sentDayAgo, answer(provider.ClassUnknown), settling, "attempt→unknown; needs_review→review(outcome_unknown)"},
		{"unknown inside retention with the budget spent goes to a person", byKey, lastOfBudget, answer(provider.ClassUnknown), settling, "attempt→unknown; needs_review→review(retries_exhausted)"},
		{"unknown past retention with the budget spent goes to a person", byKey, lastOfBudgetDayAgo, answer(provider.ClassUnknown), settling, "attempt→unknown; needs_review→review(outcome_unknown)"},

		// Unknown, settled by a lookup once absence is believable.
		{"unknown first answer is looked up after the visibility lag", byLookup, unsent, answer(provider.ClassUnknown), fromQueued, "attempt→unknown at +2s next_step=lookup"},
		{"unknown resend is looked up after the visibility lag", byLookup, sentHourAgo, answer(provider.ClassUnknown), settling, "attempt→unknown at +2s next_step=lookup"},
		{"unknown with the budget spent is still looked up", byLookup, lastOfBudget, answer(provider.ClassUnknown), settling, "attempt→unknown at +2s next_step=lookup"},
		{"unknown inside retention prefers the key to a lookup", byKeyLookup, sentHourAgo, answer(provider.ClassUnknown), settling, "attempt→unknown at +2s next_step=resend_same_key"},
		{"unknown past retention is looked up", byKeyLookup, sentDayAgo, answer(provider.ClassUnknown), settling, "attempt→unknown at +2s next_step=lookup"},
		{"unknown with the budget spent under a key is looked up", byKeyLookup, lastOfBudget, answer(provider.ClassUnknown), settling, "attempt→unknown at +2s next_step=lookup"},

		// Unknown, with neither.
		{"unknown first answer with neither goes to a person", byNeither, unsent, answer(provider.ClassUnknown), fromQueued, "attempt→unknown; needs_review→review(outcome_unknown)"},
		{"unknown with neither and the budget spent goes to a person", byNeither, lastOfBudget, answer(provider.ClassUnknown), settling, "attempt→unknown; needs_review→review(outcome_unknown)"},

		// An expired lease is an unknown outcome, sent until the lease end.
		{"expired first claim is resent under the key", byKey, unsent, expiry, fromQueued, "lease_expired→unknown at +1s next_step=resend_same_key"},
		{"expired claim is looked up after the lag from the lease end", byLookup, sentHourAgo, expiry, fromQueued, "lease_expired→unknown at +1s next_step=lookup"},
		{"expired claim with neither goes to a person", byNeither, unsent, expiry, fromQueued, "lease_expired→unknown; needs_review→review(outcome_unknown)"},
		{"expired claim past retention without lookup goes to a person", byKey, sentDayAgo, expiry, fromQueued, "lease_expired→unknown; needs_review→review(outcome_unknown)"},
		{"expired claim with the budget spent goes to a person", byKey, spent, expiry, fromQueued, "lease_expired→unknown; needs_review→review(retries_exhausted)"},
		{"expired claim whose approval was revoked is not resent", byKey, sentHourAgo, expiry, revoked, "lease_expired→unknown; needs_review→review(approval_lapsed_outcome_unknown)"},
		{"expired claim whose approval was revoked is looked up", byKeyLookup, sentHourAgo, expiry, revoked, "lease_expired→unknown at +1s next_step=lookup"},

		// A claim from unknown: resend now, look up now, or a person.
		{"claimed unknown inside retention is resent now", byKey, sentHourAgo, claimedUnknown{}, settling, "resend_same_key now"},
		{"claimed unknown past retention without lookup goes to a person", byKey, sentDayAgo, claimedUnknown{}, settling, "needs_review→review(outcome_unknown)"},
		{"claimed unknown with the budget spent goes to a person", byKey, spent, claimedUnknown{}, settling, "needs_review→review(retries_exhausted)"},
		{"claimed unknown whose approval lapsed goes to a person", byKey, sentHourAgo, claimedUnknown{}, settlingRevoked, "needs_review→review(approval_lapsed_outcome_unknown)"},
		{"claimed unknown is looked up now", byLookup, sentHourAgo, claimedUnknown{}, settling, "lookup now"},
		{"claimed unknown past retention is looked up now", byKeyLookup, sentDayAgo, claimedUnknown{}, settling, "lookup now"},
		{"claimed unknown with the budget spent is looked up now", byKeyLookup, spent, claimedUnknown{}, settling, "lookup now"},
		{"claimed unknown whose approval lapsed is looked up now", byKeyLookup, sentHourAgo, claimedUnknown{}, settlingRevoked, "lookup now"},
		{"claimed unknown with neither goes to a person", byNeither, sentHourAgo, claimedUnknown{}, settling, "needs_review→review(outcome_unknown)"},

		// A lapse before a create.
		{"lapse before anything was sent is held", byKey, unsent, lapsedUnsent{}, revoked, "approval_revoked→held"},
		{"approval for another target is held and flagged", byKey, unsent, lapsedUnsent{}, mismatched, "approval_mismatch→held flag=approval_mismatch"},
		{"lapse before a resend after an unknown outcome goes to a person", byKey, sentHourAgo, lapsedUnsent{}, settlingRevoked, "approval_revoked→review(approval_lapsed_outcome_unknown)"},

		// A lookup's verdict.
		{"untrusted lookup goes to a person", byLookup, lastSentSecondAgo, looked(ledger.LookupUntrusted), settling, "lookup_untrusted→review(lookup_untrusted)"},
		{"found effect succeeds", byLookup, lastSentSecondAgo, looked(ledger.LookupFound), settling, "lookup_found→succeeded"},
		{"absence too early is looked up again once believable", byLookup, lastSentSecondAgo, looked(ledger.LookupAbsentTooEarly), settling, "lookup_absent_too_early→unknown at +1s"},
		{"confirmed absence is resent now with the same key", byLookup, lastSentSecondAgo, looked(ledger.LookupAbsentConfirmed), settling, "note lookup_absent_confirmed; resend_same_key now"},
		{"confirmed absence whose approval lapsed goes to a person", byLookup, lastSentSecondAgo, looked(ledger.LookupAbsentConfirmed), settlingRevoked, "lookup_absent_confirmed→review(approval_lapsed_outcome_unknown)"},
		{"confirmed absence with the budget spent goes to a person", byLookup, spent, looked(ledger.LookupAbsentConfirmed), settling, "lookup_absent_confirmed→review(retries_exhausted)"},
		{"failed lookup is tried again after the longest backoff", byLookup, lastSentSecondAgo, looked(ledger.LookupFailed), settling, "lookup_failed→unknown at +5s"},
		{"failed lookup past max_elapsed goes to a person", byLookup, failingForTwoDays, looked(ledger.LookupFailed), settling, "lookup_failed→review(lookup_failing)"},
		{"inconclusive lookup is never absent: asked again after the visibility lag, nothing resent", byLookup, lastSentSecondAgo, looked(ledger.LookupInconclusive), settling, "lookup_inconclusive→unknown at +2s"},
		{"inconclusive lookup whose next ask would fall after max_elapsed goes to a person", byLookup, nextAfterMaxElapsed, looked(ledger.LookupInconclusive), settling, "lookup_inconclusive→review(outcome_unknown)"},
		{"inconclusive lookup past max_elapsed goes to a person", byLookup, failingForTwoDays, looked(ledger.LookupInconclusive), settling, "lookup_inconclusive→review(outcome_unknown)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			before := evidenceIn(tt.r)
			d := decide(tt.op, contractFor(tt.path), tt.r, tt.h, now)
			if got := describe(d); got != tt.want {
				t.Errorf("decision %q, want %q", got, tt.want)
			}
			if len(d.changes) > 0 && d.next != stepStop {
				t.Errorf("a decision that records a change goes on to %q; a recorded change ends the claim", d.next)
			}
			for _, c := range d.changes {
				if c.To == ledger.StatusReview && (c.Review.Owner != "supply-ops" || !c.Review.Deadline.Equal(now.Add(4*time.Hour))) {
					t.Errorf("review owner %q, deadline %s; want the provider's owner, due 4h from now", c.Review.Owner, c.Review.Deadline)
				}
			}
			switch r := tt.r.(type) {
			case answered:
				if c := d.changes[0]; !c.Attempted || !c.SentAt.Equal(r.sentAt) || !c.SentFrom.Equal(r.sentFrom) {
					t.Errorf("answer recorded as attempted %v, sent %s to %s; want an attempt sent %s to %s", c.Attempted, c.SentFrom, c.SentAt, r.sentFrom, r.sentAt)
				}
			case leaseExpired:
				if c := d.changes[0]; !c.OnlyIfLeaseExpired || c.Attempted || !c.SentAt.Equal(r.sentAt) {
					t.Errorf("expiry recorded only if expired %v, attempted %v, sent until %s; want only while expired, no attempt, until the lease end %s",
						c.OnlyIfLeaseExpired, c.Attempted, c.SentAt, r.sentAt)
				}
			}
			if after := evidenceIn(tt.r); !reflect.DeepEqual(before, after) {
				t.Errorf("decide changed its input's evidence: %v, was %v", after, before)
			}
		})
	}
}

// evidenceIn is a copy of r's evidence, to check that decide leaves it as
// it was.
func evidenceIn(r result) map[string]any {
	switch r := r.(type) {
	case answered:
		return maps.Clone(r.evidence)
	case leaseExpired:
		return maps.Clone(r.evidence)
	case lookedUp:
		return maps.Clone(r.evidence)
	}
	return nil
}

// TestDecideKeepsWhatTheAnswerShowed: the evidence, the provider's
// reference and the reason a refusal is not believed reach the record.
func TestDecideKeepsWhatTheAnswerShowed(t *testing.T) {
	t.Parallel()
	d := decide(unsent, contractFor(byKey), answer(provider.ClassSucceeded), fromQueued, now)
	if c := d.changes[0]; c.ProviderReference != "ord_1" || c.Detail.(map[string]any)["class"] != provider.ClassSucceeded {
		t.Errorf("success recorded with reference %q and detail %v; want ord_1 and the answer's evidence", c.ProviderReference, c.Detail)
	}
	d = decide(sentHourAgo, contractFor(byKey), answer(provider.ClassRejected), settlingOpen, now)
	if why, _ := d.changes[0].Detail.(map[string]any)["why"].(string); !strings.Contains(why, "earlier attempt") {
		t.Errorf("refusal after an unknown outcome recorded with why %q; want it to name the earlier attempt", why)
	}
	d = decide(lastSentSecondAgo, contractFor(byLookup), looked(ledger.LookupAbsentTooEarly), settling, now)
	if got, _ := d.changes[0].Detail.(map[string]any)["believable_at"].(time.Time); !got.Equal(now.Add(time.Second)) {
		t.Errorf("early absence recorded believable at %v, want %v", got, now.Add(time.Second))
	}
}

// TestNeedsOutcomeOpenOnlyForRefusals: the history is read only where a
// refusal could be believed wrongly, so a success or an unknown answer
// costs no extra query.
func TestNeedsOutcomeOpenOnlyForRefusals(t *testing.T) {
	t.Parallel()
	tests := []struct {
		class    provider.Class
		settling bool
		want     bool
	}{
		{provider.ClassSucceeded, true, false},
		{provider.ClassUnknown, true, false},
		{provider.ClassRejected, false, true},
		{provider.ClassRejected, true, true},
		{provider.ClassNotExecuted, false, false},
		{provider.ClassNotExecuted, true, true},
	}
	for _, tt := range tests {
		if got := needsOutcomeOpen(tt.class, tt.settling); got != tt.want {
			t.Errorf("needsOutcomeOpen(%s, settling %v) = %v, want %v", tt.class, tt.settling, got, tt.want)
		}
	}
}

// TestBackoffJittersAroundTheCappedExponential holds the production
// backoff, which the table replaces with a steady one: doubling from the
// initial delay, capped, within 10% jitter.
func TestBackoffJittersAroundTheCappedExponential(t *testing.T) {
	t.Parallel()
	p := provider.RetryPolicy{Initial: provider.Duration{Duration: 100 * time.Millisecond}, Max: provider.Duration{Duration: time.Second}}
	for attempt, base := range map[int]time.Duration{0: 100 * time.Millisecond, 1: 100 * time.Millisecond, 2: 200 * time.Millisecond,
		3: 400 * time.Millisecond, 4: 800 * time.Millisecond, 5: time.Second, 9: time.Second} {
		for range 20 {
			if got := backoff(p, attempt); got < base*9/10 || got > base*11/10 {
				t.Errorf("backoff after attempt %d = %s, want %s ± 10%%", attempt, got, base)
			}
		}
	}
}
