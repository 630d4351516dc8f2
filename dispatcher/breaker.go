package dispatcher

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/actledger/actledger/ledger"
	"github.com/actledger/actledger/provider"
)

// breakerRefresh is how old the view of other processes' circuits may be.
// This process's own transitions update it at once: the attempts it makes
// itself stop the moment the circuit opens.
const breakerRefresh = 500 * time.Millisecond

// breakers is the dispatcher's view of every provider's circuit breaker
// (ledger.Circuit, shared by all dispatcher processes). An outage at one
// provider then costs a few attempts, not every operation's retry budget:
// after the provider's breaker.failures consecutive attempts refused or
// left unanswered, new claims of its queued and retry_wait operations wait
// (no attempt is spent, nothing goes to review for it) until one probe,
// after the cooldown, gets an answer. Settling unknown outcomes (a resend
// under the key, a lookup) is never held back by it.
type breakers struct {
	store   *ledger.Store
	log     *slog.Logger
	signals *TestSignals

	mu       sync.Mutex
	read     time.Time // when circuits was read, on the local clock
	circuits map[string]ledger.Circuit
}

func newBreakers(store *ledger.Store, log *slog.Logger, signals *TestSignals) *breakers {
	return &breakers{store: store, log: log, signals: signals}
}

// circuitOpenError says a claim waits for an open circuit: the message
// comes back after wait.
type circuitOpenError struct {
	provider string
	wait     time.Duration
}

func (e *circuitOpenError) Error() string {
	return fmt.Sprintf("provider %s's circuit is open; the claim waits %s", e.provider, e.wait)
}

// get returns provider's circuit from a view at most breakerRefresh old.
func (b *breakers) get(ctx context.Context, name string) (ledger.Circuit, bool, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.circuits == nil || time.Since(b.read) >= breakerRefresh {
		cs, err := b.store.Circuits(ctx)
		if err != nil {
			return ledger.Circuit{}, false, err
		}
		b.circuits = make(map[string]ledger.Circuit, len(cs))
		for _, c := range cs {
			b.circuits[c.Provider] = c
		}
		b.read = time.Now()
	}
	c, ok := b.circuits[name]
	return c, ok, nil
}

func (b *breakers) set(c ledger.Circuit) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.circuits != nil {
		b.circuits[c.Provider] = c
	}
}

func (b *breakers) forget(name string, refresh bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	delete(b.circuits, name)
	if refresh {
		b.read = time.Time{}
	}
}

// gate says whether a new attempt at pc may be claimed now. A
// *circuitOpenError means not yet; probe means this claim is the open
// circuit's one probe, which closes it on any answer.
func (b *breakers) gate(ctx context.Context, pc *provider.Config) (probe bool, err error) {
	c, ok, err := b.get(ctx, pc.Name)
	if err != nil || !ok || !c.Open() {
		return false, err
	}
	if now := b.store.Now(); now.Before(*c.ProbeAt) {
		return false, &circuitOpenError{provider: pc.Name, wait: c.ProbeAt.Sub(now)}
	}
	won, err := b.store.TakeProbe(ctx, pc.Name)
	if err != nil {
		return false, err
	}
	b.forget(pc.Name, true) // the probe moved on: read it again
	if !won {
		// Another worker sends the probe; come back after its cooldown.
		return false, &circuitOpenError{provider: pc.Name, wait: *c.Cooldown}
	}
	b.log.InfoContext(ctx, "circuit open; sending a probe", "provider", pc.Name, "failures", c.Failures)
	b.signals.ProbeSent.Signal(c)
	return true, nil
}

// holds reports whether a claimed operation of pc must not be sent after
// all, because the circuit opened since it was claimed (and this claim is
// not the probe): it waits until the probe may go. A failing claim's view
// may be stale; this process's own failures are not.
func (b *breakers) holds(ctx context.Context, pc *provider.Config, probe bool) (until time.Time, hold bool) {
	if probe {
		return time.Time{}, false
	}
	c, ok, err := b.get(ctx, pc.Name)
	if err != nil || !ok || !c.Open() {
		return time.Time{}, false
	}
	return *c.ProbeAt, true
}

// record counts an attempt's answer at pc: a refusal or no answer toward
// opening its circuit (or, for a probe, a longer cooldown), anything else
// closes it.
func (b *breakers) record(ctx context.Context, pc *provider.Config, res provider.Result, probe bool) {
	if refusedOrUnanswered(res) {
		c, err := b.store.CircuitFailure(ctx, pc.Name, ledger.CircuitPolicy{
			Failures: pc.Breaker.Failures, Cooldown: pc.Breaker.Cooldown.Duration, MaxCooldown: provider.MaxBreakerCooldown,
		}, probe)
		if err != nil {
			b.log.WarnContext(ctx, "cannot record the provider's failure in its circuit", "provider", pc.Name, "err", err)
			return
		}
		b.set(c)
		switch {
		case probe:
			b.log.WarnContext(ctx, "circuit probe failed; it stays open", "provider", pc.Name, "next_probe_at", c.ProbeAt)
			b.signals.ProbeFailed.Signal(c)
		case c.Open() && c.Failures == pc.Breaker.Failures:
			b.log.WarnContext(ctx, "circuit opened: new attempts wait for a probe", "provider", pc.Name,
				"failures", c.Failures, "next_probe_at", c.ProbeAt)
			b.signals.CircuitOpened.Signal(c)
		}
		return
	}
	if _, failing, err := b.get(ctx, pc.Name); err == nil && !failing && !probe {
		return // closed, and known to be: nothing to write
	}
	if err := b.store.CircuitClose(ctx, pc.Name); err != nil {
		b.log.WarnContext(ctx, "cannot close the provider's circuit", "provider", pc.Name, "err", err)
		return
	}
	b.forget(pc.Name, false)
	if probe {
		b.log.InfoContext(ctx, "circuit closed: the probe was answered", "provider", pc.Name)
		b.signals.CircuitClosed.Signal(pc.Name)
	}
}

// refusedOrUnanswered reports whether an attempt's answer counts toward
// opening the circuit: no answer at all (refused connection, timeout,
// reset), a rate limit, or a server error. A request that could not be
// built is the file's fault, not the supplier's.
func refusedOrUnanswered(res provider.Result) bool {
	if res.Review == provider.ReviewProviderConfigError {
		return false
	}
	return res.HTTPStatus == 0 || res.HTTPStatus == 429 || res.HTTPStatus >= 500
}
