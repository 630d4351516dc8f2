package provider

import (
	"context"
	"fmt"
	"net/http"
	"time"
)

// OutcomeRule is one of a supplier's own error meanings (yaml
// "outcomes[]"): when When holds for an answer, the answer means Outcome.
// A supplier's 400 may mean "this key already holds other params" rather
// than "rejected, no effect"; a rule says so before the default table
// guesses.
type OutcomeRule struct {
	// When is a CEL bool expression over response (the answer's parsed
	// JSON, null when it is not JSON), status and headers (yaml "when").
	// An expression that fails on an answer (a field it reads is missing)
	// does not match it.
	When string
	// Outcome is what a matching answer means (yaml "outcome").
	Outcome Outcome
	// Reason says why, in words; it goes into the attempt's event (yaml
	// "reason").
	Reason string
}

// Outcome is what an outcomes rule says an answer means.
type Outcome string

// The outcomes a rule may give.
const (
	// OutcomeSucceeded: the effect exists (ClassSucceeded).
	OutcomeSucceeded Outcome = "succeeded"
	// OutcomeRejected: refused, no effect (ClassRejected).
	OutcomeRejected Outcome = "rejected"
	// OutcomeNotExecuted: refused before any effect, may be sent again
	// after a backoff, Retry-After honoured (ClassNotExecuted).
	OutcomeNotExecuted Outcome = "not_executed"
	// OutcomeUnknown: may have had an effect (ClassUnknown).
	OutcomeUnknown Outcome = "unknown"
	// OutcomeReview: a person must look (ClassUnknown, with
	// ReviewProviderOutcome): e.g. the key holds other params.
	OutcomeReview Outcome = "review"
)

// Outcomes lists every outcome, in the order above.
var Outcomes = []Outcome{OutcomeSucceeded, OutcomeRejected, OutcomeNotExecuted, OutcomeUnknown, OutcomeReview}

func (o Outcome) valid() bool {
	for _, v := range Outcomes {
		if o == v {
			return true
		}
	}
	return false
}

// class is the class of an answer the outcome is given for.
func (o Outcome) class() Class {
	switch o {
	case OutcomeSucceeded:
		return ClassSucceeded
	case OutcomeRejected:
		return ClassRejected
	case OutcomeNotExecuted:
		return ClassNotExecuted
	}
	return ClassUnknown
}

// classify is the one place an answer with a status gets its class: the
// provider's outcomes rules first, in order, then the contract's default
// table ([Classify]). review, when set, is a reason an outcome sends the
// attempt to a person with; rule is the matching rule's reason.
func (c *Config) classify(ctx context.Context, status int, header http.Header, response any, now time.Time) (class Class, retryAfter time.Duration, why string, review string, rule string) {
	if len(c.compiled.outcomes) > 0 {
		vars := map[string]any{"response": response, "status": int64(status), "headers": headerValues(header)}
		for i, when := range c.compiled.outcomes {
			if ok, err := when.evalBool(ctx, vars); err != nil || !ok {
				continue
			}
			r := c.Outcomes[i]
			class = r.Outcome.class()
			why = fmt.Sprintf("HTTP %d: outcomes[%d]: %s", status, i, r.Reason)
			if class == ClassNotExecuted {
				retryAfter, _ = ParseRetryAfter(header.Get("Retry-After"), now)
			}
			if r.Outcome == OutcomeReview {
				review = ReviewProviderOutcome
			}
			return class, retryAfter, why, review, r.Reason
		}
	}
	class, retryAfter, why = Classify(status, c.Idempotency != nil, header, now)
	return class, retryAfter, why, "", ""
}
