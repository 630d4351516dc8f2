// Package testsignal lets a test wait for the moment a long-running
// component has done something (a sweep finished, a circuit opened)
// instead of sleeping and hoping it has. A component holds a Signal in its
// TestSignals struct and calls Signal where the moment is; a test arms it
// with Init before the component starts and waits on it.
//
// Production code never arms a signal: the zero Signal is a no-op whose
// only cost is a nil check, and Signal never blocks, so a component that
// signals cannot be slowed or stopped by a test that stopped listening.
package testsignal

import "time"

// TB is the part of testing.TB a signal uses: production packages name it
// in their TestSignals' Init without importing package testing.
type TB interface {
	Helper()
	Errorf(format string, args ...any)
	Fatalf(format string, args ...any)
}

// Capacity is how many values an armed signal holds for its test. A
// periodic component signals as long as it runs; values past Capacity
// that nobody waited for are dropped (see Signal.Signal).
const Capacity = 100

// Timeout bounds every wait: far longer than any moment a test waits for
// takes on a loaded machine, so a timeout means it never came.
const Timeout = 30 * time.Second

// Signal is one kind of moment a component reports, with a value that
// says what happened (struct{} when the moment is all). Its zero value is
// unarmed.
type Signal[T any] struct {
	ch chan T
	tb TB
}

// Init arms s for the test tb. Call it before the component that signals
// runs: arming is not synchronised with Signal.
func (s *Signal[T]) Init(tb TB) {
	s.ch = make(chan T, Capacity)
	s.tb = tb
}

// Signal reports v to the armed test, and does nothing when s is unarmed.
// It never blocks: when Capacity values already wait, v is dropped. Only
// a loop's values that no test waits for fill a signal, and a test that
// waits for a later moment Clears them first.
func (s *Signal[T]) Signal(v T) {
	if s.ch == nil {
		return
	}
	select {
	case s.ch <- v:
	default:
	}
}

// WaitOrTimeout returns the oldest value not yet taken, waiting for one
// up to Timeout; the test fails if none comes.
func (s *Signal[T]) WaitOrTimeout() T {
	s.armed()
	s.tb.Helper()
	timer := time.NewTimer(Timeout)
	defer timer.Stop()
	select {
	case v := <-s.ch:
		return v
	case <-timer.C:
		s.tb.Fatalf("testsignal: no signal within %s", Timeout)
		var zero T
		return zero
	}
}

// Clear discards the values not yet taken, so that the next WaitOrTimeout
// returns a moment that came after the call (or during it: a sweep in
// progress while Clear ran may end after it).
func (s *Signal[T]) Clear() {
	s.armed()
	for {
		select {
		case <-s.ch:
		default:
			return
		}
	}
}

// RequireEmpty fails the test if a value waits: the moment did not come
// since the last one taken.
func (s *Signal[T]) RequireEmpty() {
	s.armed()
	s.tb.Helper()
	select {
	case v := <-s.ch:
		s.tb.Errorf("testsignal: want no signal, got %v", v)
	default:
	}
}

// armed panics on a signal no test armed: waiting on it would only ever
// time out.
func (s *Signal[T]) armed() {
	if s.ch == nil {
		panic("testsignal: the signal is not armed (Init)")
	}
}
