package mocksupplier

import "fmt"

// FaultKind names one way the supplier misbehaves on a create request. The values are the ones
// the admin API accepts in {"kind": ...}.
type FaultKind string

// The faults split into two families, because that is what a client must tell apart: before
// commit no order exists and a retry is safe; after commit the order exists whatever the
// client saw.
const (
	// DropAfterCommit creates the order, then closes the connection without a response: the
	// client sees EOF, the "lost response" that must become an unknown outcome.
	DropAfterCommit FaultKind = "drop_after_commit"
	// Error500AfterCommit creates the order, then answers 500.
	Error500AfterCommit FaultKind = "error_500_after_commit"
	// UnavailableBeforeCommit creates nothing and answers 503 with Retry-After.
	UnavailableBeforeCommit FaultKind = "unavailable_before_commit"
	// Reject422 creates nothing and answers 422, a confirmed rejection.
	Reject422 FaultKind = "reject_422"
	// Delay creates the order, then waits Fault.MS milliseconds before answering 201, so a
	// client that times out during the wait has lost a response to an order that exists.
	Delay FaultKind = "delay"
	// RateLimit429 creates nothing and answers 429 with Retry-After.
	RateLimit429 FaultKind = "rate_limit_429"
	// CommitLate waits Fault.MS milliseconds, then creates the order whether or not the client
	// is still waiting (a real API keeps processing after its client gives up), then answers
	// 201 if anyone listens: a client whose timeout is shorter has an unknown outcome whose
	// order appears only later.
	CommitLate FaultKind = "commit_late"
	// StallBeforeCommit waits Fault.MS milliseconds (or until the client gives up) and creates
	// nothing, then answers 503: a client that times out has an unknown outcome that had no
	// effect.
	StallBeforeCommit FaultKind = "stall_before_commit"
	// Unauthorized401 refuses the request with 401 before its Idempotency-Key is looked at, as an
	// API does after its credentials were rotated: even a repeat of a request whose order exists
	// gets a definite refusal that says nothing about that order. Unlike the other faults it is
	// taken before the key is checked, so it applies to repeats too.
	Unauthorized401 FaultKind = "unauthorized_401"
)

// Fault is one queued misbehaviour, consumed by one create request.
type Fault struct {
	Kind FaultKind `json:"kind"`
	// MS is the wait of a Delay fault, in milliseconds.
	MS int `json:"ms,omitempty"`
	// RetryAfterS is the Retry-After of a 503 or 429, in seconds; 0 means 1.
	RetryAfterS int `json:"retry_after_s,omitempty"`
}

// beforeCommit reports whether the fault refuses the request before any order is created.
func (f Fault) beforeCommit() bool {
	switch f.Kind {
	case UnavailableBeforeCommit, Reject422, RateLimit429, StallBeforeCommit, Unauthorized401:
		return true
	}
	return false
}

func (f Fault) validate() error {
	switch f.Kind {
	case DropAfterCommit, Error500AfterCommit, UnavailableBeforeCommit, Reject422, Delay, RateLimit429,
		CommitLate, StallBeforeCommit, Unauthorized401:
	default:
		return fmt.Errorf("unknown fault kind %q", f.Kind)
	}
	if f.MS < 0 {
		return fmt.Errorf("fault %s: ms must not be negative, got %d", f.Kind, f.MS)
	}
	if f.RetryAfterS < 0 {
		return fmt.Errorf("fault %s: retry_after_s must not be negative, got %d", f.Kind, f.RetryAfterS)
	}
	return nil
}

func (f Fault) retryAfter() int {
	if f.RetryAfterS == 0 {
		return 1
	}
	return f.RetryAfterS
}

// SetFaults replaces the fault queue of reference (the client_reference of create requests);
// reference "" sets the whole-run queue, used by requests whose reference has no queue of its own
// (or an empty one). Each create request that reaches order creation takes the head of its queue;
// idempotent replays and refused requests (400, 409) consume nothing. Calling it with no faults
// clears the queue. It panics on an invalid fault, which is a bug in the calling test.
func (s *Server) SetFaults(reference string, faults ...Fault) {
	for _, f := range faults {
		if err := f.validate(); err != nil {
			panic("mocksupplier: SetFaults: " + err.Error())
		}
	}
	s.mu.Lock()
	s.faults.Set(reference, faults...)
	s.mu.Unlock()
}

// popAuthFaultLocked takes the next fault for reference if it is Unauthorized401, which applies
// before the Idempotency-Key is looked at. s.mu must be held.
func (s *Server) popAuthFaultLocked(reference string) bool {
	_, ok := s.faults.TakeIf(reference, func(f Fault) bool { return f.Kind == Unauthorized401 })
	return ok
}
