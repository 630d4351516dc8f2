package ledger

import (
	"context"
	"time"
)

// LookupAnswer is what a provider's lookup said, in the values of
// provider.LookupStatus: the ledger does not import package provider, and
// a test holds the two together. Anything but found or absent tells
// nothing.
type LookupAnswer string

// The answers of a lookup (provider.LookupFound, LookupAbsent, LookupError).
const (
	LookupAnswerFound  LookupAnswer = "found"
	LookupAnswerAbsent LookupAnswer = "absent"
	LookupAnswerError  LookupAnswer = "error"
	// LookupAnswerDuplicate: the provider holds two or more effects for
	// the key.
	LookupAnswerDuplicate LookupAnswer = "duplicate"
	// LookupAnswerInconclusive: the provider answered, but said the
	// answer is not the whole truth (its lookup.complete is false).
	LookupAnswerInconclusive LookupAnswer = "inconclusive"
)

// LookupVerdict is what a lookup establishes about an operation whose
// outcome is unknown.
type LookupVerdict string

// The verdicts of JudgeLookup; each is recorded under the event kind of
// the same name (EventLookupUntrusted, EventLookupFound, …) by the
// dispatcher, and answered as a ReplayResult by a replay.
const (
	// LookupUntrusted: the operation may have been sent to another
	// account or environment than the one the lookup would ask, so no
	// answer from there proves anything; the provider is not asked.
	LookupUntrusted LookupVerdict = "untrusted"
	// LookupFound: the provider holds the effect.
	LookupFound LookupVerdict = "found"
	// LookupAbsentTooEarly: the provider holds nothing yet, but it was
	// asked before an effect of the last send had to be visible.
	LookupAbsentTooEarly LookupVerdict = "absent_too_early"
	// LookupAbsentConfirmed: the provider holds nothing, and was asked
	// late enough for that to mean nothing happened.
	LookupAbsentConfirmed LookupVerdict = "absent_confirmed"
	// LookupFailed: the lookup told nothing.
	LookupFailed LookupVerdict = "failed"
	// LookupDuplicate: the provider holds two or more effects for the
	// operation's key: a person settles which counts; never found.
	LookupDuplicate LookupVerdict = "duplicate"
	// LookupInconclusive: the provider answered, but not with the whole
	// truth: neither found nor absent, however late it was asked.
	LookupInconclusive LookupVerdict = "inconclusive"
)

// Lookup is what a lookup's verdict rests on besides the answer. LookupOf
// builds it.
type Lookup struct {
	// SentElsewhere are the accounts and environments, other than the one
	// the lookup asks, that the operation's requests may have reached.
	SentElsewhere []Target
	// BelievableAt is when an answer of absence becomes believable
	// (AbsenceBelievableAt). Zero when nothing was ever sent.
	BelievableAt time.Time
}

// LookupLag is what a lookup needs of its provider's contract: when an
// answer of absence about a request last sent at lastSent becomes
// believable, its visibility lag after the send. *provider.Config
// satisfies it; it is defined here so the ledger never imports package
// provider.
type LookupLag interface {
	LookupBelievableAt(lastSent time.Time) time.Time
}

// AbsenceBelievableAt is when an answer of absence about op becomes
// believable under lag: the visibility lag after the latest moment a
// request may still have been in flight (Operation.LastSentAt); zero when
// nothing was ever sent. It is the one reading of that moment: a lookup's
// verdict (LookupOf), the schedule of the next lookup and a review item's
// lookup_reliable_after all use it.
func AbsenceBelievableAt(op Operation, lag LookupLag) time.Time {
	if op.LastSentAt == nil {
		return time.Time{}
	}
	return lag.LookupBelievableAt(*op.LastSentAt)
}

// LookupOf is what a lookup of op asked in here rests on besides the
// answer: the other targets op's requests may have reached, and when an
// absence becomes believable under lag. The dispatcher's lookup and an
// operator's replay both take it from here, so both judge an operation
// on the same facts.
func (s *Store) LookupOf(ctx context.Context, op Operation, here Target, lag LookupLag) (Lookup, error) {
	elsewhere, err := s.foreignTargets(ctx, op.ID, here)
	if err != nil {
		return Lookup{}, err
	}
	return Lookup{SentElsewhere: elsewhere, BelievableAt: AbsenceBelievableAt(op, lag)}, nil
}

// JudgeLookup is the one rule for believing a lookup, which the
// dispatcher's lookup and an operator's replay both follow. A lookup is
// trusted only in the account and environment the operation was sent to:
// otherwise ask is never called (asking one account whether an effect
// exists proves nothing about another). ask calls the provider and says
// when it asked, on the database's clock: the answer tells what the
// provider saw when the request arrived, however late it comes back, so
// absence is judged as of the asking, and believed only from l.BelievableAt
// on. An error from ask is returned as it is, with no verdict.
func JudgeLookup(l Lookup, ask func() (LookupAnswer, time.Time, error)) (LookupVerdict, error) {
	if len(l.SentElsewhere) > 0 {
		return LookupUntrusted, nil
	}
	answer, asked, err := ask()
	if err != nil {
		return "", err
	}
	switch answer {
	case LookupAnswerFound:
		return LookupFound, nil
	case LookupAnswerDuplicate:
		// Two effects exist whenever they were seen: no lag makes one go
		// away.
		return LookupDuplicate, nil
	case LookupAnswerInconclusive:
		// An answer that is not the whole truth proves no absence, and
		// may hide a second effect: it is never found nor absent.
		return LookupInconclusive, nil
	case LookupAnswerAbsent:
		if asked.Before(l.BelievableAt) {
			return LookupAbsentTooEarly, nil
		}
		return LookupAbsentConfirmed, nil
	default:
		return LookupFailed, nil
	}
}
