package outbox

import (
	"cmp"
	"context"
	"log/slog"

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

// Notifier wakes relays, in this process and others, after outbox rows were
// committed. Signal never blocks: signals that arrive while a notification
// is being sent collapse into one more, so a burst of commits costs a few
// notifications, not one each.
type Notifier struct {
	pool *pgxpool.Pool
	log  *slog.Logger
	kick chan struct{}
	svc  startstop.Loop
}

// NewNotifier returns a notifier that sends its notifications through pool.
func NewNotifier(pool *pgxpool.Pool, logger *slog.Logger) *Notifier {
	return &Notifier{pool: pool, log: cmp.Or(logger, slog.Default()).With("component", "outbox_notifier"), kick: make(chan struct{}, 1)}
}

// Signal says that outbox rows were committed. Call it after the commit.
func (n *Notifier) Signal() {
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
		}
	})
}

// Stop stops sending notifications.
func (n *Notifier) Stop() { n.svc.Stop() }
