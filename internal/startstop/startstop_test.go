package startstop_test

import (
	"context"
	"errors"
	"slices"
	"sync/atomic"
	"testing"

	"github.com/actledger/actledger/internal/startstop"
)

func TestStopWaitsAndTheLoopCanStartAgain(t *testing.T) {
	t.Parallel()
	var s startstop.Loop
	var runs, finished atomic.Int32
	run := func(ctx context.Context) {
		runs.Add(1)
		<-ctx.Done()
		finished.Add(1)
	}
	if err := s.Start(context.Background(), run); err != nil {
		t.Fatal(err)
	}
	if err := s.Start(context.Background(), run); !errors.Is(err, startstop.ErrStarted) {
		t.Errorf("second Start: %v, want ErrStarted", err)
	}
	s.Stop()
	s.Stop()
	if finished.Load() != 1 {
		t.Fatalf("Stop returned before the work finished")
	}
	if err := s.Start(context.Background(), run); err != nil {
		t.Fatalf("restart: %v", err)
	}
	s.Stop()
	if runs.Load() != 2 || finished.Load() != 2 {
		t.Errorf("runs %d finished %d, want 2 and 2", runs.Load(), finished.Load())
	}
}

// recorder is a Service that logs its starts and stops, and fails to start
// when told to.
type recorder struct {
	name string
	fail bool
	log  *[]string
}

func (r *recorder) Start(context.Context) error {
	if r.fail {
		*r.log = append(*r.log, "fail "+r.name)
		return errors.New(r.name + " cannot start")
	}
	*r.log = append(*r.log, "start "+r.name)
	return nil
}

func (r *recorder) Stop() { *r.log = append(*r.log, "stop "+r.name) }

func TestStartAllStopsWhatStartedWhenALaterStartFails(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		failing string // the service that fails to start; "" for none
		want    []string
	}{
		{"all start", "", []string{"start a", "start b", "start c", "start d"}},
		{"first fails", "a", []string{"fail a"}},
		{"third fails", "c", []string{"start a", "start b", "fail c", "stop b", "stop a"}},
		{"last fails", "d", []string{"start a", "start b", "start c", "fail d", "stop c", "stop b", "stop a"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var got []string
			var services []startstop.Service
			for _, name := range []string{"a", "b", "c", "d"} {
				services = append(services, &recorder{name: name, fail: name == tt.failing, log: &got})
			}
			err := startstop.StartAll(context.Background(), services...)
			if (err != nil) != (tt.failing != "") {
				t.Fatalf("StartAll: %v, want an error: %t", err, tt.failing != "")
			}
			if !slices.Equal(got, tt.want) {
				t.Errorf("got %q, want %q", got, tt.want)
			}
		})
	}
}

func TestStopAllStopsNewestFirst(t *testing.T) {
	t.Parallel()
	var got []string
	startstop.StopAll(&recorder{name: "a", log: &got}, &recorder{name: "b", log: &got})
	if want := []string{"stop b", "stop a"}; !slices.Equal(got, want) {
		t.Errorf("got %q, want %q", got, want)
	}
}
