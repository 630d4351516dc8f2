package startstop_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"

	"github.com/actledger/actledger/internal/startstop"
)

func TestStopWaitsAndTheServiceCanStartAgain(t *testing.T) {
	t.Parallel()
	var s startstop.Service
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
