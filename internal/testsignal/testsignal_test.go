package testsignal_test

import (
	"fmt"
	"testing"

	"github.com/actledger/actledger/internal/testsignal"
)

// An unarmed signal, the one production code holds, takes any number of
// values without blocking or keeping them.
func TestUnarmedSignalIsANoOp(t *testing.T) {
	t.Parallel()
	var s testsignal.Signal[int]
	for i := range 2 * testsignal.Capacity {
		s.Signal(i)
	}
}

// An armed signal hands its values over in order; a test that waits gets
// the oldest not yet taken.
func TestArmedSignalHandsValuesOverInOrder(t *testing.T) {
	t.Parallel()
	var s testsignal.Signal[string]
	s.Init(t)
	s.Signal("first")
	s.Signal("second")
	for _, want := range []string{"first", "second"} {
		if got := s.WaitOrTimeout(); got != want {
			t.Errorf("WaitOrTimeout() = %q, want %q", got, want)
		}
	}
	s.RequireEmpty()
}

// A loop nobody waits for never blocks on its signal: past Capacity its
// values are dropped, and Clear discards those kept, so the next wait is
// for a moment after it.
func TestFullSignalDropsAndClearDiscards(t *testing.T) {
	t.Parallel()
	var s testsignal.Signal[int]
	s.Init(t)
	for i := range testsignal.Capacity + 10 {
		s.Signal(i)
	}
	if got := s.WaitOrTimeout(); got != 0 {
		t.Errorf("first value %d, want 0 (the oldest kept)", got)
	}
	s.Clear()
	s.RequireEmpty()
	s.Signal(-1)
	if got := s.WaitOrTimeout(); got != -1 {
		t.Errorf("value after Clear %d, want -1", got)
	}
}

// recorder is a test that records its errors instead of failing.
type recorder struct {
	testing.TB
	errors []string
}

func (r *recorder) Errorf(format string, args ...any) {
	r.errors = append(r.errors, fmt.Sprintf(format, args...))
}

// RequireEmpty fails the test when a moment came that should not have.
func TestRequireEmptyFailsOnAValue(t *testing.T) {
	t.Parallel()
	r := &recorder{TB: t}
	var s testsignal.Signal[int]
	s.Init(r)
	s.RequireEmpty()
	if len(r.errors) != 0 {
		t.Fatalf("an empty signal failed the test: %v", r.errors)
	}
	s.Signal(7)
	s.RequireEmpty()
	if len(r.errors) != 1 {
		t.Errorf("errors %v, want one for the value 7", r.errors)
	}
}

// Waiting on a signal no test armed is a mistake in the test, said at
// once rather than after a timeout.
func TestWaitingOnAnUnarmedSignalPanics(t *testing.T) {
	t.Parallel()
	defer func() {
		if recover() == nil {
			t.Error("WaitOrTimeout on an unarmed signal returned")
		}
	}()
	var s testsignal.Signal[int]
	s.WaitOrTimeout()
}
