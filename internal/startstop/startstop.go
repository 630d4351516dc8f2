// Package startstop is the one lifecycle every long-running component of
// actledger shares: Start returns at once and runs the work in the
// background; Stop cancels it, waits for it to finish, and may be called any
// number of times; a stopped component may be started again.
package startstop

import (
	"context"
	"errors"
	"sync"
)

// ErrStarted is returned by Start on a running service.
var ErrStarted = errors.New("already started")

// Service runs one background function at a time. Embed it or keep it as a
// field; the zero value is ready.
type Service struct {
	mu     sync.Mutex
	cancel context.CancelFunc
	done   chan struct{}
}

// Start runs run in a goroutine with a context that Stop (or ctx) cancels.
func (s *Service) Start(ctx context.Context, run func(ctx context.Context)) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.done != nil {
		return ErrStarted
	}
	ctx, s.cancel = context.WithCancel(ctx)
	done := make(chan struct{})
	s.done = done
	go func() {
		defer close(done)
		run(ctx)
	}()
	return nil
}

// Stop cancels the running function and waits until it has returned.
func (s *Service) Stop() {
	s.mu.Lock()
	cancel, done := s.cancel, s.done
	s.mu.Unlock()
	if cancel == nil {
		return
	}
	cancel()
	<-done
	s.mu.Lock()
	if s.done == done {
		s.cancel, s.done = nil, nil
	}
	s.mu.Unlock()
}
