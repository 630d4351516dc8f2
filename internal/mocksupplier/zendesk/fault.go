package zendesk

import (
	"fmt"
	"time"
)

// FaultKind names one way the fake misbehaves on a ticket create (POST /api/v2/tickets.json).
type FaultKind string

// The kinds split by where they strike: before the idempotency key is looked at, before the
// commit (no ticket, nothing stored under the key), or after it (the ticket exists whatever the
// client saw).
const (
	// RateLimited answers 429 with Retry-After, in plain text as Zendesk's rate limiter does,
	// before the key is looked at: nothing is created or stored.
	RateLimited FaultKind = "rate_limited"
	// Unavailable answers 503 with Retry-After, which Zendesk documents for a database timeout
	// or deadlock, before the key is looked at: nothing is created or stored.
	Unavailable FaultKind = "unavailable"
	// KeyInUse answers 409 as if another request with the same key were still executing;
	// nothing is created or stored. Zendesk does not document this case; see the package
	// documentation. (DelayAfterCommit makes the same answer happen for real, to a concurrent
	// repeat.)
	KeyInUse FaultKind = "key_in_use"
	// DropBeforeCommit closes the connection with no answer and creates nothing.
	DropBeforeCommit FaultKind = "drop_before_commit"
	// Error500AfterCommit creates the ticket, then answers 500; the 500 is stored under the
	// key, so a repeat with it gets the same 500.
	Error500AfterCommit FaultKind = "error_500_after_commit"
	// DelayAfterCommit creates the ticket, then waits Fault.Delay (or until the client gives up)
	// before storing and sending the answer; meanwhile a repeat with the key gets 409.
	DelayAfterCommit FaultKind = "delay_after_commit"
	// DropAfterCommit creates the ticket, stores the answer under the key, then closes the
	// connection with no answer: the lost response.
	DropAfterCommit FaultKind = "drop_after_commit"
)

// Fault is one queued misbehaviour, taken by one ticket create.
type Fault struct {
	Kind FaultKind
	// RetryAfter is the Retry-After of RateLimited and Unavailable, rounded up to whole seconds;
	// below one second it is sent as 1 (Zendesk always sends the header with these answers).
	RetryAfter time.Duration
	// Delay is how long DelayAfterCommit holds the answer.
	Delay time.Duration
}

func (f Fault) beforeKey() bool { return f.Kind == RateLimited || f.Kind == Unavailable }

func (f Fault) validate() error {
	switch f.Kind {
	case RateLimited, Unavailable, KeyInUse, DropBeforeCommit, Error500AfterCommit, DelayAfterCommit, DropAfterCommit:
	default:
		return fmt.Errorf("unknown fault kind %q", f.Kind)
	}
	if f.RetryAfter < 0 || f.Delay < 0 {
		return fmt.Errorf("fault %s: durations must not be negative", f.Kind)
	}
	return nil
}

// Fail appends faults to the queue. Each ticket create looks at the head of the queue twice:
// before its idempotency key is looked at it takes the head if that is RateLimited or
// Unavailable; once it is a new, valid request it takes the head if that is any other kind.
// Replays and refused requests take nothing. It panics on an invalid fault.
func (s *Server) Fail(faults ...Fault) {
	for _, f := range faults {
		if err := f.validate(); err != nil {
			panic("zendesk: Fail: " + err.Error())
		}
	}
	s.mu.Lock()
	s.faults.Add(faults...)
	s.mu.Unlock()
}

// PendingFaults returns the faults no request has taken yet, in queue order.
func (s *Server) PendingFaults() []Fault {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.faults.Pending()
}

// takeFaultLocked removes and returns the head of the queue if it strikes at this stage. s.mu
// must be held.
func (s *Server) takeFaultLocked(beforeKey bool) (Fault, bool) {
	return s.faults.TakeIf(func(f Fault) bool { return f.beforeKey() == beforeKey })
}

// retryAfterSeconds is d in whole seconds, rounded up, at least 1.
func retryAfterSeconds(d time.Duration) int64 {
	return max(1, int64((d+time.Second-1)/time.Second))
}
