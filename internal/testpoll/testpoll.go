// Package testpoll waits, in a test, for a condition that nothing signals
// (a row written, a server ready, a cache entry expired): it checks again
// every Interval until the condition holds, and fails the test with the
// condition's last answer after a deadline. A test polls through it
// instead of writing the loop, and never sleeps for a fixed time in the
// hope that the condition holds by then.
package testpoll

import (
	"testing"
	"time"
)

// Interval is the wait between two checks: short beside the moments
// tests wait for, long enough that a check that queries Postgres or
// NATS does not load the machine.
const Interval = 20 * time.Millisecond

// Until calls check until it returns nil, and fails t with check's last
// error once timeout has passed.
func Until(t testing.TB, timeout time.Duration, check func() error) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	ticker := time.NewTicker(Interval)
	defer ticker.Stop()
	for {
		err := check()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("after %s: %v", timeout, err)
		}
		<-ticker.C
	}
}
