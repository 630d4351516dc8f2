package provider

import (
	"context"
	"encoding/json"
	"time"
)

// Provider is the seam between the dispatcher/reconciler and a supplier. Implementations call the
// supplier and classify what came back; they never change ledger state themselves, so the same
// classification rules apply to every supplier and can be tested without one.
type Provider interface {
	// Create asks the supplier to carry out the effect once, tagged with externalKey (in the body
	// under reference_param and, if the supplier has an idempotency contract, in its header).
	// It always returns a Result; there is no error return because every failure is itself a
	// classified outcome.
	Create(ctx context.Context, req CreateRequest) Result
	// Lookup asks the supplier whether an effect tagged with externalKey exists. Whether an
	// "absent" answer is believable yet is the caller's decision (see [Config.LookupBelievableAt];
	// the ledger's JudgeLookup applies it).
	Lookup(ctx context.Context, req LookupRequest) LookupResult
}

// LookupRequest is what a lookup asks about: the operation's key and its params, for a lookup
// path that names {params.NAME} as a create path does.
type LookupRequest struct {
	// ExternalKey is the operation's external key, the one its creates carried.
	ExternalKey string
	// Params is the operation's params, a JSON object. Empty or null means {}.
	Params json.RawMessage
}

// Of is the Provider that calls cfg's supplier: overrides[cfg.Name] when there is one (a test's
// fake or fault injector), else [NewHTTP] of cfg with opts. The dispatcher and the reconciler pick theirs
// with it, so a lookup goes to the same supplier implementation as the creates it settles.
func Of(cfg *Config, overrides map[string]Provider, opts HTTPOptions) Provider {
	if p, ok := overrides[cfg.Name]; ok {
		return p
	}
	return NewHTTP(cfg, opts)
}

// CreateRequest is what the dispatcher sends for one attempt of one operation.
type CreateRequest struct {
	// ExternalKey is the operation's stable external key. Every attempt of the same operation
	// must carry the same key: it is what lets the supplier (and a lookup) recognise a repeat.
	ExternalKey string
	// Params is the operation's params, a JSON object. Empty or null means {}.
	Params json.RawMessage
}

// Class is the outcome class of one provider call. The mapping from answers to classes lives in
// one place, [Classify] (and, for calls with no answer, in the transport handling of [HTTP]);
// the dispatcher maps classes to operation states.
type Class string

const (
	// ClassSucceeded: the supplier confirmed the effect. State: succeeded.
	ClassSucceeded Class = "succeeded"
	// ClassRejected: the supplier confirmed a rejection with no effect. State: failed.
	ClassRejected Class = "rejected"
	// ClassNotExecuted: the request provably had no effect; it may be sent again with the same
	// external key after a backoff. State: retry_wait.
	ClassNotExecuted Class = "not_executed"
	// ClassUnknown: the request may have reached the supplier and nothing confirmed what
	// happened. State: unknown; never resent blindly.
	ClassUnknown Class = "unknown"
)

// Result is the full record of one Create attempt: its class plus the evidence a person needs
// later (status, capped body, timing, account and environment).
type Result struct {
	// Class is the outcome class.
	Class Class
	// HTTPStatus is the supplier's status code; 0 when no response was received.
	HTTPStatus int
	// ProviderReference is the supplier's reference for the effect (the reference_field of a 2xx
	// body). It may be empty even when Class is ClassSucceeded: the status confirmed the effect
	// but the body did not name it; Error then says why.
	ProviderReference string
	// RetryAfter is the supplier's Retry-After hint (0 when absent), capped at 24h.
	RetryAfter time.Duration
	// Error is a short description of the transport error or of why the answer was classified
	// so. It never contains secrets or request URLs.
	Error string
	// Body is the start of the response body (at most 2 KiB, valid UTF-8, no NUL bytes) kept as
	// evidence.
	Body string
	// Review, when set, hands the attempt to a person, for this reason:
	// ReviewProviderConfigError (the request could not be built; nothing
	// was sent), ReviewReferenceMissing (Class is ClassSucceeded: the
	// effect exists but its reference cannot be read; never resent) or
	// ReviewProviderOutcome (an outcomes rule said so).
	Review string
	// Reason is the reason of the outcomes rule that classified the
	// answer; empty when the default table did.
	Reason string
	// Sent reports whether any request bytes may have left this process. It is conservative:
	// true as soon as a connection was handed to the request. False means the supplier cannot
	// have seen this attempt.
	Sent bool
	// StartedAt and EndedAt bound the attempt, from HTTPOptions.Now.
	StartedAt, EndedAt time.Time
	// Account and Environment are the supplier account and environment the call was made in, so
	// evidence from a different account or environment is never trusted.
	Account, Environment string
}

// LookupStatus is the answer of a lookup.
type LookupStatus string

const (
	// LookupFound: the supplier holds an effect for the key; ProviderReference names it.
	LookupFound LookupStatus = "found"
	// LookupAbsent: the supplier says it holds no effect for the key. Believable only once the
	// provider's visibility lag has passed since the last send.
	LookupAbsent LookupStatus = "absent"
	// LookupError: the lookup told us nothing (5xx, timeout, garbage, no lookup configured).
	LookupError LookupStatus = "error"
	// LookupDuplicate: the supplier holds two or more effects for the key; References names
	// them. Never "found": a person settles which one counts.
	LookupDuplicate LookupStatus = "duplicate"
	// LookupInconclusive: the supplier answered, but lookup.complete says the answer is not the
	// whole truth (a search that stopped at a timeout): neither found nor absent, whatever
	// records it holds. It is asked again after the visibility lag.
	LookupInconclusive LookupStatus = "inconclusive"
)

// The review reasons a provider gives with a Result (Result.Review), in the ledger's words
// (ledger.ReviewReason; a test holds the two together).
const (
	// ReviewProviderConfigError: the create request cannot be built for the operation's params.
	ReviewProviderConfigError = "provider_config_error"
	// ReviewReferenceMissing: a 2xx confirmed the effect but its reference cannot be read.
	ReviewReferenceMissing = "reference_missing"
	// ReviewProviderOutcome: one of the provider's outcomes rules hands the answer to a person.
	ReviewProviderOutcome = "provider_outcome"
)

// LookupResult is the record of one lookup, kept as evidence for the reconciler.
type LookupResult struct {
	// Status is the answer.
	Status LookupStatus
	// ProviderReference is the supplier's reference when Status is LookupFound.
	ProviderReference string
	// References are the supplier's references of every effect when Status is
	// LookupDuplicate.
	References []string
	// HTTPStatus is the supplier's status code; 0 when no response was received.
	HTTPStatus int
	// Error explains a LookupError (or notes something odd about another answer).
	Error string
	// Body is the start of the response body (at most 2 KiB) kept as evidence.
	Body string
	// At is when the answer was received (or the attempt gave up).
	At time.Time
	// Account and Environment are where the lookup was made; an absence in another account or
	// environment proves nothing.
	Account, Environment string
}

// Evidence is what an event about the lookup keeps: enough for a person to judge it later, never
// a whole body or a secret. Every writer of such an event (the dispatcher's lookup, an operator's
// replay) keeps this, so one answer reads alike whoever asked.
func (r LookupResult) Evidence() map[string]any {
	e := map[string]any{"lookup": r.Status, "http_status": r.HTTPStatus, "at": r.At, "account": r.Account, "environment": r.Environment}
	if r.ProviderReference != "" {
		e["provider_reference"] = r.ProviderReference
	}
	if len(r.References) > 0 {
		e["references"] = r.References
	}
	if r.Error != "" {
		e["error"] = r.Error
	}
	if r.Body != "" {
		e["body"] = r.Body
	}
	return e
}
