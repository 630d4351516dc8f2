// Package startstop is the one lifecycle every long-running component of
// actledger shares: Start returns at once and runs the work in the
// background; Stop cancels it, waits for it to finish, and may be called any
// number of times; a stopped component may be started again.
//
// Loop is the helper a component embeds to get that behaviour; Service is
// the contract callers see, and StartAll/StopAll start and stop a set of
// them so that a failed start never leaves the ones already started running.
package startstop

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
)

// ErrStarted is returned by Start on a running loop.
var ErrStarted = errors.New("already started")

// Service is a long-running component: Start returns at once with the work
// running in the background; Stop ends it, waits for it, and is idempotent.
type Service interface {
	Start(ctx context.Context) error
	Stop()
}

// StartAll starts services in order. When one fails to start, those
// already started are stopped, newest first, and its error is returned:
// the caller has nothing to clean up.
func StartAll(ctx context.Context, services ...Service) error {
	for i, s := range services {
		if err := s.Start(ctx); err != nil {
			StopAll(services[:i]...)
			return fmt.Errorf("start %T: %w", s, err)
		}
	}
	return nil
}

// StopAll stops services newest first (the reverse of StartAll's order),
// so nothing is stopped while a later component may still use it.
func StopAll(services ...Service) {
	for _, s := range slices.Backward(services) {
		s.Stop()
	}
}

// Loop runs one background function at a time. Embed it or keep it as a
// field; the zero value is ready.
type Loop struct {
	mu     sync.Mutex
	cancel context.CancelFunc
	done   chan struct{}
}

// Start runs run in a goroutine with a context that Stop (or ctx) cancels.
func (s *Loop) Start(ctx context.Context, run func(ctx context.Context)) error {
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
func (s *Loop) Stop() {
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
