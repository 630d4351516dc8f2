package startstop

import (
	"context"
	"time"
)

// Every runs fn every interval until ctx ends, the loop of every periodic
// component (sweepers, the watcher's upkeep). An error fn returns while ctx
// is live goes to failed, which logs it, and the next tick tries again:
// errors inside a loop are logged, never returned.
func Every(ctx context.Context, interval time.Duration, fn func(context.Context) error, failed func(context.Context, error)) {
	ticker := time.NewTicker(interval)
	defer ticker.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-ticker.C:
		}
		if err := fn(ctx); err != nil && ctx.Err() == nil {
			failed(ctx, err)
		}
	}
}

// Sleep waits d, or until ctx ends, whichever comes first: a loop that
// backs off must still stop at once.
func Sleep(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}
