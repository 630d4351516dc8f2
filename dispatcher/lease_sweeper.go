package dispatcher

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/actledger/actledger/broker"
	"github.com/actledger/actledger/internal/startstop"
	"github.com/actledger/actledger/internal/testsignal"
	"github.com/actledger/actledger/ledger"
	"github.com/actledger/actledger/provider"
	"github.com/actledger/actledger/tracing"
)

// Defaults of SweeperConfig, applied by NewLeaseSweeper to the zero fields.
const (
	DefaultSweepInterval        = time.Second
	DefaultStuckAfter           = 5 * time.Minute
	DefaultMaxRedispatchBackoff = 5 * time.Minute
	DefaultSweepBatch           = 500
	DefaultSweeperWorkerID      = "sweeper"
)

// SweeperConfig configures a LeaseSweeper. Zero values mean the documented
// defaults.
type SweeperConfig struct {
	// Registry holds the provider contracts. Required.
	Registry *provider.Registry
	// Interval between sweeps. Default DefaultSweepInterval.
	Interval time.Duration
	// StuckAfter is how long an operation may wait for a dispatch message
	// that should have come before it is re-published. Default
	// DefaultStuckAfter: longer than JetStream's default duplicate window,
	// and than a healthy backlog.
	StuckAfter time.Duration
	// MaxRedispatchBackoff caps how long a stuck operation waits between
	// re-publishes: the first waits Interval doubled, each next one twice
	// as long. Default DefaultMaxRedispatchBackoff.
	MaxRedispatchBackoff time.Duration
	// Batch bounds the operations handled per sweep. Default
	// DefaultSweepBatch.
	Batch int
	// WorkerID names the sweeper in events. Default
	// DefaultSweeperWorkerID.
	WorkerID string
	// OnRequestsExpired, when set, is told how many proposals a sweep held
	// because nobody decided them before their request_ttl (for metrics).
	OnRequestsExpired func(n int)
	Logger            *slog.Logger
}

// LeaseSweeper makes sure nothing waits forever in a non-terminal state: a
// claim whose lease expired becomes unknown (its version bumps, so the old
// worker is fenced) and takes the lookup path; an operation whose dispatch
// message never arrived is published again; a proposal nobody decided
// before its action's request_ttl is held.
type LeaseSweeper struct {
	store  *ledger.Store
	broker *broker.Broker
	cfg    SweeperConfig
	log    *slog.Logger

	svc startstop.Loop

	// TestSignals are armed by tests (SweeperTestSignals.Init) before
	// Start; unarmed, as in production, they do nothing.
	TestSignals SweeperTestSignals
}

// SweeperTestSignals are the moments of a running sweeper a test waits
// for, instead of sleeping through sweeps it hopes happened.
type SweeperTestSignals struct {
	// Swept: a sweep of the loop ended without error (expired leases,
	// stuck operations and expired requests all looked at).
	Swept testsignal.Signal[struct{}]
}

// Init arms every signal for tb.
func (ts *SweeperTestSignals) Init(tb testsignal.TB) { ts.Swept.Init(tb) }

// NewLeaseSweeper returns a sweeper; several may run at once (their
// changes are conditional, so each finding is acted on once).
func NewLeaseSweeper(store *ledger.Store, b *broker.Broker, cfg SweeperConfig) (*LeaseSweeper, error) {
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	return &LeaseSweeper{store: store, broker: b, cfg: cfg,
		log: cmp.Or(cfg.Logger, slog.Default()).With("component", "lease_sweeper")}, nil
}

// withDefaults fills the zero fields with the defaults.
func (cfg SweeperConfig) withDefaults() SweeperConfig {
	cfg.Interval = cmp.Or(cfg.Interval, DefaultSweepInterval)
	cfg.StuckAfter = cmp.Or(cfg.StuckAfter, DefaultStuckAfter)
	cfg.MaxRedispatchBackoff = cmp.Or(cfg.MaxRedispatchBackoff, DefaultMaxRedispatchBackoff)
	cfg.Batch = cmp.Or(cfg.Batch, DefaultSweepBatch)
	cfg.WorkerID = cmp.Or(cfg.WorkerID, DefaultSweeperWorkerID)
	return cfg
}

// validate reports the first unusable field of a config with defaults
// applied, by name.
func (cfg SweeperConfig) validate() error {
	switch {
	case cfg.Registry == nil:
		return errors.New("lease sweeper: SweeperConfig.Registry is required")
	case cfg.Interval <= 0:
		return fmt.Errorf("lease sweeper: SweeperConfig.Interval %s must be positive", cfg.Interval)
	case cfg.StuckAfter <= 0:
		return fmt.Errorf("lease sweeper: SweeperConfig.StuckAfter %s must be positive", cfg.StuckAfter)
	case cfg.MaxRedispatchBackoff <= 0:
		return fmt.Errorf("lease sweeper: SweeperConfig.MaxRedispatchBackoff %s must be positive", cfg.MaxRedispatchBackoff)
	case cfg.Batch <= 0:
		return fmt.Errorf("lease sweeper: SweeperConfig.Batch %d must be positive", cfg.Batch)
	}
	return nil
}

// Start runs sweeps in the background until Stop. It returns at once.
func (s *LeaseSweeper) Start(ctx context.Context) error {
	return s.svc.Start(ctx, func(ctx context.Context) {
		startstop.Every(ctx, s.cfg.Interval, s.sweepAndSignal, func(ctx context.Context, err error) {
			s.log.WarnContext(ctx, "sweep failed; next one will retry", "err", err)
		})
	})
}

// Stop stops sweeping and waits for the sweep in progress. Safe to call
// more than once.
func (s *LeaseSweeper) Stop() { s.svc.Stop() }

// sweepAndSignal is one sweep of the loop, signalled when it ended well.
func (s *LeaseSweeper) sweepAndSignal(ctx context.Context) error {
	if err := s.Sweep(ctx); err != nil {
		return err
	}
	s.TestSignals.Swept.Signal(struct{}{})
	return nil
}

// Sweep runs one pass: expired leases first, then lost messages, then
// proposals past their request_ttl.
func (s *LeaseSweeper) Sweep(ctx context.Context) error {
	expired, err := s.store.LeaseExpired(ctx, s.cfg.Batch)
	if err != nil {
		return err
	}
	for _, op := range expired {
		if err := s.expire(ctx, op); err != nil {
			return err
		}
	}
	if err := s.redispatch(ctx); err != nil {
		return err
	}
	return s.holdExpiredRequests(ctx)
}

// holdExpiredRequests holds proposals nobody decided in time. They were
// never sent, so holding them is always safe; a later approval finds them
// no longer awaiting (409 not_awaiting_approval).
func (s *LeaseSweeper) holdExpiredRequests(ctx context.Context) error {
	held, err := s.store.HoldExpiredRequests(ctx, "sweeper:"+s.cfg.WorkerID)
	if err != nil {
		return err
	}
	for _, op := range held {
		s.log.InfoContext(ctx, "approval request expired; held", "operation_id", op.ID, "tenant", op.Tenant, "action", op.Action)
	}
	if len(held) > 0 && s.cfg.OnRequestsExpired != nil {
		s.cfg.OnRequestsExpired(len(held))
	}
	return nil
}

// redispatch publishes again the dispatch message of operations that
// waited too long for one. An operation that stays stuck (its new message
// is lost or dropped too) is not re-published every sweep: each
// re-publish is recorded, and the next waits twice as long as the last,
// from Interval up to MaxRedispatchBackoff.
func (s *LeaseSweeper) redispatch(ctx context.Context) error {
	cutoff := s.store.Now().Add(-s.cfg.StuckAfter)
	stuck, err := s.store.Redispatch(ctx, cutoff, s.cfg.Interval, s.cfg.MaxRedispatchBackoff, s.cfg.Batch, "sweeper:"+s.cfg.WorkerID)
	if err != nil {
		return err
	}
	for _, op := range stuck {
		s.log.WarnContext(ctx, "dispatch message never arrived; published it again",
			"operation_id", op.ID, "tenant", op.Tenant, "status", op.Status)
	}
	return nil
}

// expire moves an operation whose claim lapsed to unknown: the worker may
// have called the provider, so the next step is a lookup (or a resend under
// an idempotency key, or a person), never a blind create. A call under the
// claim may have been in flight until the lease ended (a worker starts a
// call only if its full timeout fits in the lease), so the lease end, not
// the sweeper's clock, is the "last send" that lookups wait visibility_lag
// after; and the change applies only if the lease is still expired in the
// same statement, so a worker that has just extended it keeps it.
func (s *LeaseSweeper) expire(ctx context.Context, op ledger.Operation) error {
	pc, ok := s.cfg.Registry.Provider(op.Provider)
	if !ok {
		s.log.ErrorContext(ctx, "expired lease of an operation whose provider is not configured", "operation_id", op.ID, "provider", op.Provider)
		return nil
	}
	now := s.store.Now()
	s.log.WarnContext(ctx, "dispatch lease expired; outcome unknown", "operation_id", op.ID, "tenant", op.Tenant,
		"lease_owner", op.LeaseOwner, "attempts", op.Attempts)
	lapse, err := s.store.CheckLapse(ctx, op.ID)
	if err != nil {
		return err
	}
	lastSent := now
	if op.LeaseExpiresAt != nil {
		lastSent = *op.LeaseExpiresAt
	}
	// The claim began when the operation last changed (confirmations do
	// not touch updated_at): no call under it reached the provider before.
	claimedAt := op.UpdatedAt
	expired := leaseExpired{sentFrom: claimedAt, sentAt: lastSent,
		evidence: map[string]any{"lease_owner": op.LeaseOwner, "lease_expires_at": op.LeaseExpiresAt}}
	// The same policy as a worker's unknown answer. The sweeper calls
	// nothing, so it judges a resend without a worker's call margin: the
	// worker that claims the operation judges it again with its own.
	d := decide(op, contract{pc: pc, backoff: backoff}, expired, history{lapse: lapse}, now)
	w := &work{store: s.store, actor: "sweeper:" + s.cfg.WorkerID, log: s.log, tracer: tracing.Tracer(nil), op: op, pc: pc, lapse: lapse}
	return w.follow(ctx, d)
}
