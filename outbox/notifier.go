package outbox

import (
	"cmp"
	"context"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/actledger/actledger/internal/startstop"
)

// Channel is the LISTEN/NOTIFY channel a Notifier notifies and relays
// listen on.
const Channel = "actledger_outbox"

// outboxNotify wakes every relay listening on Channel. It runs in a
// transaction of its own with synchronous_commit off: nothing is written, so
// nothing needs a flush, and no data transaction waits for the notify-queue
// lock this takes.
const outboxNotify = `BEGIN; SET LOCAL synchronous_commit TO off; SELECT pg_notify('` + Channel + `', ''); COMMIT`

// NotifySpacing is the least time between two notifications a Notifier
// sends. A notification is a transaction that takes Postgres's notify-queue
// lock; under load one per commit would cost the database more than the
// commits' own rows. A relay in the writer's own process is woken at once
// (Notifier.Local); relays elsewhere learn of new rows within NotifySpacing,
// and every relay also polls.
const NotifySpacing = 5 * time.Millisecond

// Notifier wakes relays, in this process and others, after outbox rows were
// committed. Signal never blocks: signals that arrive while a notification
// is being sent, or within NotifySpacing of the last one, collapse into one
// more, so a burst of commits costs a few notifications, not one each.
type Notifier struct {
	pool  *pgxpool.Pool
	log   *slog.Logger
	kick  chan struct{}
	local atomic.Pointer[func()]
	svc   startstop.Loop
}

// NewNotifier returns a notifier that sends its notifications through pool.
func NewNotifier(pool *pgxpool.Pool, logger *slog.Logger) *Notifier {
	return &Notifier{pool: pool, log: cmp.Or(logger, slog.Default()).With("component", "outbox_notifier"), kick: make(chan struct{}, 1)}
}

// Local makes every Signal also call wake at once: a relay running in this
// process (relay.Relay.Wake) publishes the rows without waiting for the
// notification's round trip through Postgres.
func (n *Notifier) Local(wake func()) { n.local.Store(&wake) }

// Signal says that outbox rows were committed. Call it after the commit.
func (n *Notifier) Signal() {
	if wake := n.local.Load(); wake != nil {
		(*wake)()
	}
	select {
	case n.kick <- struct{}{}:
	default:
	}
}

// Start sends notifications in the background until Stop.
func (n *Notifier) Start(ctx context.Context) error {
	return n.svc.Start(ctx, func(ctx context.Context) {
		for {
			select {
			case <-ctx.Done():
				return
			case <-n.kick:
			}
			if _, err := n.pool.Exec(ctx, outboxNotify); err != nil && ctx.Err() == nil {
				// Relays poll as well: the rows are published a little later.
				n.log.WarnContext(ctx, "cannot wake relays", "err", err)
			}
			select {
			case <-ctx.Done():
				return
			case <-time.After(NotifySpacing):
			}
		}
	})
}

// Stop stops sending notifications.
func (n *Notifier) Stop() { n.svc.Stop() }
