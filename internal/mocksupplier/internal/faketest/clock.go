package faketest

import (
	"sync"
	"time"
)

// Start is when a NewClock starts, unless a test says otherwise.
var Start = time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)

// Clock is a clock a test moves, for a fake's Config.Now, so a test crosses a lag or a key's
// retention without sleeping. It is safe for concurrent use.
type Clock struct {
	mu  sync.Mutex
	now time.Time
}

// NewClock returns a Clock showing start.
func NewClock(start time.Time) *Clock { return &Clock{now: start} }

// Now is the time the clock shows.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// Advance moves the clock d ahead.
func (c *Clock) Advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}
