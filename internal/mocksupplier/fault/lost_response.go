package fault

import (
	"context"
	"net/http"
	"time"
)

// DropConnection closes the client's connection without writing a response, so the client sees
// EOF: after the commit, the lost response of a request whose effect exists all the same; before
// it, a lost request that had no effect. Without a hijackable connection (HTTP/2) it aborts the
// stream instead.
func DropConnection(w http.ResponseWriter) {
	if conn, _, err := http.NewResponseController(w).Hijack(); err == nil {
		_ = conn.Close()
		return
	}
	panic(http.ErrAbortHandler)
}

// Hold waits d, or until ctx ends (the client gave up), and reports whether the whole wait
// passed; d <= 0 does not wait. A fake holds an answer after the commit with it, so that a
// client with a shorter timeout loses the answer to an effect that exists, or holds a request
// that stalls, or a slow lookup; held under context.WithoutCancel, a commit lands late whether or
// not the client still waits.
func Hold(ctx context.Context, d time.Duration) bool {
	if d <= 0 {
		return ctx.Err() == nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}
