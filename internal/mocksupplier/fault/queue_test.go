package fault_test

import (
	"testing"

	"github.com/actledger/actledger/internal/mocksupplier/fault"
)

func TestQueueTakesTheHeadOnlyIfItIsAccepted(t *testing.T) {
	t.Parallel()
	var q fault.Queue[string]
	q.Add("rate_limited", "drop")
	isDrop := func(f string) bool { return f == "drop" }
	if f, ok := q.TakeIf(isDrop); ok {
		t.Fatalf("TakeIf took %q from behind a head it refuses", f)
	}
	if f, ok := q.Take(); !ok || f != "rate_limited" {
		t.Fatalf("Take = %q, %v; want the head", f, ok)
	}
	if f, ok := q.TakeIf(isDrop); !ok || f != "drop" {
		t.Fatalf("TakeIf = %q, %v; want drop", f, ok)
	}
	if got := q.Pending(); got != nil {
		t.Errorf("Pending = %v, want none", got)
	}
}

func TestQueuesServeAReferenceBeforeTheRunWideQueue(t *testing.T) {
	t.Parallel()
	var q fault.Queues[string]
	q.Set("", "run-1", "run-2")
	q.Set("po-1", "own-1")
	steps := []struct {
		name string
		take func() (string, bool)
		want string // "" for nothing taken
	}{
		{"another reference takes from the run", func() (string, bool) { return q.Take("po-2") }, "run-1"},
		{"a refused head stays", func() (string, bool) { return q.TakeIf("po-1", func(string) bool { return false }) }, ""},
		{"the reference takes its own", func() (string, bool) { return q.Take("po-1") }, "own-1"},
		{"then the run's", func() (string, bool) { return q.Take("po-1") }, "run-2"},
		{"until none is left", func() (string, bool) { return q.Take("po-1") }, ""},
	}
	for _, s := range steps { // sequential: each step takes from the queues
		got, ok := s.take()
		if ok != (s.want != "") || got != s.want {
			t.Errorf("%s: got %q, %v; want %q", s.name, got, ok, s.want)
		}
	}
}

func TestQueuesMatchReferencesARequestCarries(t *testing.T) {
	t.Parallel()
	var q fault.Queues[string]
	q.Set("al_1", "own")
	q.Set("", "run")
	in := func(body string) func(string) bool {
		return func(ref string) bool { return ref == body }
	}
	if got, _ := q.TakeMatch(in("al_2")); got != "run" {
		t.Errorf("a request matching no queue took %q, want the run's", got)
	}
	if got, _ := q.TakeMatch(in("al_1")); got != "own" {
		t.Errorf("a request matching al_1 took %q, want its own", got)
	}
	q.Set("al_3", "x")
	q.Set("al_3")
	q.Clear()
	if got, ok := q.TakeMatch(in("al_3")); ok {
		t.Errorf("cleared queues gave %q", got)
	}
}
