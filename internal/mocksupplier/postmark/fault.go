package postmark

import (
	"fmt"
	"maps"
	"slices"
)

// FaultKind names one way the fake misbehaves on a send request.
type FaultKind string

// The faults split into two families, because that is what a client must tell apart: before
// commit no message was accepted and a resend is safe; after commit the message exists (and is
// on its way to the recipient) whatever the client saw, and Postmark has no idempotency key that
// would let a resend find it. A 500 exists in both families: Postmark says that "in most cases"
// the message is lost, which is not all cases.
const (
	// DropAfterCommit accepts the message, then closes the connection without an answer: the
	// client sees EOF, the lost response that must become an unknown outcome.
	DropAfterCommit FaultKind = "drop_after_commit"
	// Error500AfterCommit accepts the message, then answers 500.
	Error500AfterCommit FaultKind = "error_500_after_commit"
	// Error500BeforeCommit answers 500 and accepts nothing: the usual case, by Postmark's word.
	Error500BeforeCommit FaultKind = "error_500_before_commit"
	// DelayAfterCommit accepts the message, then waits Fault.MS milliseconds before answering
	// 200, so a client that gives up sooner has lost the answer to a message that exists.
	DelayAfterCommit FaultKind = "delay_after_commit"
	// RateLimit429 accepts nothing and answers 429 with ErrorCode 429, and Retry-After when
	// Fault.RetryAfterS is set (Postmark does not document whether it sends one).
	RateLimit429 FaultKind = "rate_limit_429"
	// Reject422 accepts nothing and answers 422 with Fault.ErrorCode (default 300).
	Reject422 FaultKind = "reject_422"
	// Unauthorized401 accepts nothing and answers 401 with ErrorCode 10, as after the server
	// token was rotated.
	Unauthorized401 FaultKind = "unauthorized_401"
)

// Fault is one queued misbehaviour, consumed by one send request.
type Fault struct {
	Kind FaultKind
	// MS is the wait of a DelayAfterCommit fault, in milliseconds.
	MS int
	// RetryAfterS is the Retry-After of a RateLimit429 fault, in seconds; 0 sends none.
	RetryAfterS int
	// ErrorCode is the API error code of a Reject422 fault; 0 means ErrInvalidEmailRequest.
	ErrorCode int
}

func (f Fault) beforeCommit() bool {
	switch f.Kind {
	case Error500BeforeCommit, RateLimit429, Reject422, Unauthorized401:
		return true
	}
	return false
}

func (f Fault) validate() error {
	switch f.Kind {
	case DropAfterCommit, Error500AfterCommit, Error500BeforeCommit, DelayAfterCommit, RateLimit429, Reject422, Unauthorized401:
	default:
		return fmt.Errorf("unknown fault kind %q", f.Kind)
	}
	if f.MS < 0 || f.RetryAfterS < 0 || f.ErrorCode < 0 {
		return fmt.Errorf("fault %s: ms, retry_after_s and error_code must not be negative", f.Kind)
	}
	return nil
}

// SetFaults replaces the fault queue of reference: it applies to send requests whose Metadata
// holds reference as a value. Reference "" sets the whole-run queue, used by requests that match
// no queue of their own (or only empty ones). A send request takes the head of its queue only
// once it has passed every check that comes first (token, body, recipients), so refused requests
// consume nothing. No faults clears the queue. It panics on an invalid fault, which is a bug in
// the calling test.
func (s *Server) SetFaults(reference string, faults ...Fault) {
	for _, f := range faults {
		if err := f.validate(); err != nil {
			panic("postmark: SetFaults: " + err.Error())
		}
	}
	s.mu.Lock()
	s.faults.Set(reference, faults...)
	s.mu.Unlock()
}

// popFaultLocked takes the next fault for a send request with metadata. s.mu must be held.
func (s *Server) popFaultLocked(metadata map[string]string) (Fault, bool) {
	values := slices.Collect(maps.Values(metadata))
	return s.faults.TakeMatch(func(reference string) bool { return slices.Contains(values, reference) })
}
