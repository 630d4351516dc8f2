package stripe

import (
	"fmt"
	"time"
)

// FaultKind names one way the fake misbehaves on a create request (POST /v1/payment_intents or
// POST /v1/refunds).
type FaultKind string

// The kinds split by where they strike, because that is what a client must tell apart: before
// the idempotency layer, before the commit (nothing exists, nothing is stored under the key),
// or after the commit (the object exists whatever the client saw).
const (
	// RateLimited answers 429 before the idempotency layer, as Stripe's rate limiters run
	// before it: nothing is created or stored, and the request may be a repeat of one whose
	// object exists. Fault.RetryAfter, when set, is sent as Retry-After.
	RateLimited FaultKind = "rate_limited"
	// Unavailable answers 503 before the idempotency layer; nothing is created or stored.
	// Fault.RetryAfter, when set, is sent as Retry-After.
	Unavailable FaultKind = "unavailable"
	// KeyInUse answers 409 with code idempotency_key_in_use, as Stripe does while another
	// request with the same key is executing; nothing is created or stored. (A DelayAfterCommit
	// fault makes the same answer happen for real, to a concurrent repeat.)
	KeyInUse FaultKind = "key_in_use"
	// DropBeforeCommit closes the connection with no answer and creates nothing: a lost
	// response whose request had no effect.
	DropBeforeCommit FaultKind = "drop_before_commit"
	// CardDeclined fails the confirmation of a new PaymentIntent: the PaymentIntent is created
	// with status requires_payment_method and a last_payment_error, the answer is 402 with a
	// card_error (code card_declined) carrying it, and that answer is stored under the key. It
	// applies to PaymentIntent creates only; a refund create passes it by.
	CardDeclined FaultKind = "card_declined"
	// Error500AfterCommit creates the object, then answers 500 with an api_error. The 500 is
	// stored under the key, as Stripe stores it: a repeat with the key gets the same 500.
	Error500AfterCommit FaultKind = "error_500_after_commit"
	// DelayAfterCommit creates the object, then waits Fault.Delay (or until the client gives up)
	// before storing and sending the answer. Meanwhile the key is in flight: a repeat with it
	// gets 409 idempotency_key_in_use.
	DelayAfterCommit FaultKind = "delay_after_commit"
	// DropAfterCommit creates the object, stores the answer under the key, then closes the
	// connection with no answer: the lost response that must become an unknown outcome.
	DropAfterCommit FaultKind = "drop_after_commit"
)

// Paths a Fault can be limited to.
const (
	PathPaymentIntents = "/v1/payment_intents"
	PathRefunds        = "/v1/refunds"
)

// Fault is one queued misbehaviour, taken by one create request.
type Fault struct {
	Kind FaultKind
	// Path limits the fault to creates on PathPaymentIntents or PathRefunds; empty means any
	// create.
	Path string
	// RetryAfter is the Retry-After of RateLimited and Unavailable, rounded up to whole seconds;
	// 0 sends no Retry-After (Stripe's documentation promises none).
	RetryAfter time.Duration
	// Delay is how long DelayAfterCommit holds the answer.
	Delay time.Duration
}

// beforeKey reports whether the fault strikes before the idempotency layer.
func (f Fault) beforeKey() bool { return f.Kind == RateLimited || f.Kind == Unavailable }

// appliesTo reports whether a create on path may take f.
func (f Fault) appliesTo(path string) bool {
	if f.Path != "" && f.Path != path {
		return false
	}
	return f.Kind != CardDeclined || path == PathPaymentIntents
}

func (f Fault) validate() error {
	switch f.Kind {
	case RateLimited, Unavailable, KeyInUse, DropBeforeCommit, CardDeclined, Error500AfterCommit,
		DelayAfterCommit, DropAfterCommit:
	default:
		return fmt.Errorf("unknown fault kind %q", f.Kind)
	}
	switch f.Path {
	case "", PathPaymentIntents, PathRefunds:
	default:
		return fmt.Errorf("fault %s: path must be %q, %q or empty, got %q", f.Kind, PathPaymentIntents, PathRefunds, f.Path)
	}
	if f.Kind == CardDeclined && f.Path == PathRefunds {
		return fmt.Errorf("fault %s applies to PaymentIntents only", f.Kind)
	}
	if f.RetryAfter < 0 || f.Delay < 0 {
		return fmt.Errorf("fault %s: durations must not be negative", f.Kind)
	}
	return nil
}

// Fail appends faults to the queue. Each create request looks at the head of the queue twice:
// before the idempotency layer it takes the head if that is a RateLimited or Unavailable fault
// for its path (so a repeat of a stored request can be refused too); once it is a new request
// that passed validation it takes the head if that is any other fault for its path. Idempotent
// replays, refused requests and requests the head does not apply to take nothing, and leave the
// queue as it was. It panics on an invalid fault, which is a bug in the calling test.
func (s *Server) Fail(faults ...Fault) {
	for _, f := range faults {
		if err := f.validate(); err != nil {
			panic("stripe: Fail: " + err.Error())
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

// takeFaultLocked removes and returns the head of the queue if a create on path may take it at
// this stage (before the idempotency layer, or after validation). s.mu must be held.
func (s *Server) takeFaultLocked(path string, beforeKey bool) (Fault, bool) {
	return s.faults.TakeIf(func(f Fault) bool { return f.beforeKey() == beforeKey && f.appliesTo(path) })
}

// retryAfterSeconds is d in whole seconds, rounded up.
func retryAfterSeconds(d time.Duration) int64 {
	return int64((d + time.Second - 1) / time.Second)
}
