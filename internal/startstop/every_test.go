package startstop_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/actledger/actledger/internal/startstop"
)

// TestEveryRunsUntilItsContextEndsAndReportsFailuresAlive: a failing run
// is reported and the loop goes on; once the context ends it returns, and a
// run cut short by that end is not reported as a failure.
func TestEveryRunsUntilItsContextEndsAndReportsFailuresAlive(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(t.Context())
	runs, failures := 0, 0
	done := make(chan struct{})
	go func() {
		defer close(done)
		startstop.Every(ctx, time.Millisecond, func(ctx context.Context) error {
			runs++
			if runs == 3 {
				cancel()
				return ctx.Err()
			}
			return errors.New("not yet")
		}, func(context.Context, error) { failures++ })
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("Every did not return after its context ended")
	}
	if runs != 3 || failures != 2 {
		t.Errorf("runs %d, failures reported %d; want 3 and 2", runs, failures)
	}
}
