package broker

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/actledger/actledger/internal/startstop"
)

// Pull runs handle, each in a goroutine of handlers, for the messages of
// cons, with at most slots of them held at once, until ctx ends. A
// message holds its slot until handle calls free (at most once has an
// effect) or returns, so a worker can give its room back before it has
// settled the message. A pull that fails or is interrupted is retried,
// and logged to log as the pull of what ("dispatch messages"). A message
// that arrives once ctx has ended is not taken: it is nak'ed, for
// JetStream to redeliver to a live worker. Pull returns without waiting
// for the handlers; the caller waits for handlers.
func Pull(ctx context.Context, cons jetstream.Consumer, slots int, handlers *sync.WaitGroup, log *slog.Logger, what string,
	handle func(msg jetstream.Msg, free func())) {
	room := make(chan struct{}, slots)
	for ctx.Err() == nil {
		iter, err := cons.Messages(jetstream.PullMaxMessages(slots), jetstream.PullExpiry(PullExpiry))
		if err != nil {
			log.WarnContext(ctx, "cannot pull "+what+"; retrying", "err", err)
			startstop.Sleep(ctx, time.Second)
			continue
		}
		stop := context.AfterFunc(ctx, iter.Stop)
		for {
			msg, err := iter.Next()
			if err != nil {
				if ctx.Err() == nil && !errors.Is(err, jetstream.ErrMsgIteratorClosed) {
					log.WarnContext(ctx, "pull of "+what+" interrupted", "err", err)
				}
				break
			}
			select {
			case room <- struct{}{}:
			case <-ctx.Done():
				_ = msg.Nak()
				continue
			}
			handlers.Go(func() {
				var once sync.Once
				free := func() { once.Do(func() { <-room }) }
				defer free()
				handle(msg, free)
			})
		}
		stop()
		iter.Stop()
	}
}
