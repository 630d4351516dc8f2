package statement

import (
	"context"
	"time"

	"github.com/actledger/actledger/internal/startstop"
	"github.com/actledger/actledger/internal/testsignal"
	"github.com/actledger/actledger/ledger"
)

// DefaultCheckInterval is how often a Scheduler looks for a provider
// whose statement is due.
const DefaultCheckInterval = 30 * time.Second

// Scheduler runs each provider's statement every reconcile.every (a
// provider without every runs only on demand). Every serve process runs
// one: a provider is due when its last run, by any process, started
// every ago, and the lease makes the one that starts first run it.
type Scheduler struct {
	runner   *Runner
	interval time.Duration
	loop     startstop.Loop

	// TestSignals are sent in tests only.
	TestSignals SchedulerSignals
}

// SchedulerSignals are the Scheduler's test signals.
type SchedulerSignals struct {
	// Ran is sent after each scheduled run, with its report.
	Ran testsignal.Signal[Report]
}

// NewScheduler returns a scheduler of r's providers that looks for due
// ones every interval (0: DefaultCheckInterval).
func NewScheduler(r *Runner, interval time.Duration) *Scheduler {
	if interval <= 0 {
		interval = DefaultCheckInterval
	}
	return &Scheduler{runner: r, interval: interval}
}

// Start starts the schedule.
func (s *Scheduler) Start(ctx context.Context) error { return s.loop.Start(ctx, s.run) }

// Stop stops it; a run under way is cut short and recorded as it ends.
func (s *Scheduler) Stop() { s.loop.Stop() }

func (s *Scheduler) run(ctx context.Context) {
	t := time.NewTicker(s.interval)
	defer t.Stop()
	for {
		s.RunDue(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// RunDue runs, one after another, the statements that are due now.
func (s *Scheduler) RunDue(ctx context.Context) {
	r := s.runner
	last, err := r.cfg.Store.LastStatementRuns(ctx, nil)
	if err != nil {
		r.log.ErrorContext(ctx, "statement schedule: read the last runs", "err", err)
		return
	}
	started := make(map[string]time.Time, len(last))
	for _, run := range last {
		started[run.Provider] = run.StartedAt
	}
	now := r.cfg.Store.Now()
	for _, cfg := range r.cfg.Registry.Providers() {
		st := cfg.Reconcile
		if st == nil || st.Every <= 0 || ctx.Err() != nil {
			continue
		}
		if at, ok := started[cfg.Name]; ok && now.Sub(at) < st.Every {
			continue
		}
		rep, err := r.Run(ctx, cfg.Name, Options{Actor: "schedule"})
		if err != nil {
			r.log.ErrorContext(ctx, "statement schedule: run", "provider", cfg.Name, "err", err)
			continue
		}
		if rep.Run.Status != ledger.RunComplete {
			r.log.WarnContext(ctx, "scheduled statement run did not complete", "provider", cfg.Name,
				"status", rep.Run.Status, "error", deref(rep.Run.Error))
		}
		s.TestSignals.Ran.Signal(rep)
	}
}
