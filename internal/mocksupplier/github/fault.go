package github

import (
	"fmt"
	"strings"
)

// FaultKind names one way the fake misbehaves on a create request.
type FaultKind string

// The faults split into two families, because that is what a client must tell apart: before
// commit no issue exists and a resend is safe; after commit the issue exists whatever the client
// saw, and GitHub has no idempotency key that would let a resend find it.
const (
	// DropAfterCommit creates the issue, then closes the connection without an answer: the
	// client sees EOF, the lost response that must become an unknown outcome.
	DropAfterCommit FaultKind = "drop_after_commit"
	// Error500AfterCommit creates the issue, then answers 500 {"message":"Server Error"}, as
	// GitHub answers a request it cut off after 10 seconds.
	Error500AfterCommit FaultKind = "error_500_after_commit"
	// DelayAfterCommit creates the issue, then waits Fault.MS milliseconds before answering 201,
	// so a client that gives up sooner has lost the answer to an issue that exists.
	DelayAfterCommit FaultKind = "delay_after_commit"
	// PrimaryRateLimit403 creates nothing and answers 403 with x-ratelimit-remaining: 0 and
	// x-ratelimit-reset Fault.RetryAfterS seconds ahead: the primary rate limit is used up.
	PrimaryRateLimit403 FaultKind = "primary_rate_limit_403"
	// SecondaryRateLimit403 creates nothing and answers 403 with Retry-After and the secondary
	// rate limit message (content created too quickly).
	SecondaryRateLimit403 FaultKind = "secondary_rate_limit_403"
	// SecondaryRateLimit429 is SecondaryRateLimit403 with status 429, which GitHub may send
	// instead.
	SecondaryRateLimit429 FaultKind = "secondary_rate_limit_429"
	// Reject422 creates nothing and answers 422 Validation Failed ("Validation failed, or the
	// endpoint has been spammed").
	Reject422 FaultKind = "reject_422"
	// Unauthorized401 creates nothing and answers 401 Bad credentials, as GitHub does after the
	// token was revoked.
	Unauthorized401 FaultKind = "unauthorized_401"
)

// Fault is one queued misbehaviour, consumed by one create request.
type Fault struct {
	Kind FaultKind
	// MS is the wait of a DelayAfterCommit fault, in milliseconds.
	MS int
	// RetryAfterS is the Retry-After of a secondary rate limit, or how far ahead
	// x-ratelimit-reset is for a primary one, in seconds; 0 means 60.
	RetryAfterS int
}

func (f Fault) beforeCommit() bool {
	switch f.Kind {
	case PrimaryRateLimit403, SecondaryRateLimit403, SecondaryRateLimit429, Reject422, Unauthorized401:
		return true
	}
	return false
}

func (f Fault) validate() error {
	switch f.Kind {
	case DropAfterCommit, Error500AfterCommit, DelayAfterCommit, PrimaryRateLimit403, SecondaryRateLimit403,
		SecondaryRateLimit429, Reject422, Unauthorized401:
	default:
		return fmt.Errorf("unknown fault kind %q", f.Kind)
	}
	if f.MS < 0 || f.RetryAfterS < 0 {
		return fmt.Errorf("fault %s: ms and retry_after_s must not be negative", f.Kind)
	}
	return nil
}

func (f Fault) retryAfter() int {
	if f.RetryAfterS == 0 {
		return 60
	}
	return f.RetryAfterS
}

// SetFaults replaces the fault queue of reference: it applies to create requests whose issue
// body contains reference. Reference "" sets the whole-run queue, used by requests that match no
// queue of their own (or only empty ones). A create request takes the head of its queue only once
// it has passed every check that comes first (credential, API version, repository, body), so
// refused requests consume nothing. No faults clears the queue. It panics on an invalid fault,
// which is a bug in the calling test.
func (s *Server) SetFaults(reference string, faults ...Fault) {
	for _, f := range faults {
		if err := f.validate(); err != nil {
			panic("github: SetFaults: " + err.Error())
		}
	}
	s.mu.Lock()
	s.faults.Set(reference, faults...)
	s.mu.Unlock()
}

// popFaultLocked takes the next fault for a create request whose issue body is body. s.mu must
// be held.
func (s *Server) popFaultLocked(body string) (Fault, bool) {
	return s.faults.TakeMatch(func(reference string) bool { return strings.Contains(body, reference) })
}
