package relay_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/actledger/actledger/broker"
	"github.com/actledger/actledger/internal/testdb"
	"github.com/actledger/actledger/internal/testnats"
	"github.com/actledger/actledger/internal/testoutbox"
	"github.com/actledger/actledger/internal/testpoll"
	"github.com/actledger/actledger/ledger"
	"github.com/actledger/actledger/outbox"
	"github.com/actledger/actledger/relay"
)

func setup(t *testing.T) (*pgxpool.Pool, *broker.Broker) {
	t.Helper()
	return testdb.New(t), testnats.New(t)
}

// newRelay returns a relay on pool's outbox and b's stream.
func newRelay(t *testing.T, pool *pgxpool.Pool, b *broker.Broker, cfg relay.Config) *relay.Relay {
	t.Helper()
	r, err := relay.New(pool, b.JetStream(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// startRelay is newRelay, its test signals armed, started, and stopped
// when the test ends.
func startRelay(t *testing.T, pool *pgxpool.Pool, b *broker.Broker, cfg relay.Config) *relay.Relay {
	t.Helper()
	r := newRelay(t, pool, b, cfg)
	r.TestSignals.Init(t)
	if err := r.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(r.Stop)
	return r
}

func quiet() *slog.Logger { return slog.New(slog.DiscardHandler) }

// insertRows adds n outbox rows for provider acme in one statement.
func insertRows(t *testing.T, pool *pgxpool.Pool, b *broker.Broker, n int) {
	t.Helper()
	_, err := pool.Exec(context.Background(), `INSERT INTO outbox (subject, msg_id, payload)
SELECT $1, 'msg-' || i, convert_to('{"i":' || i || '}', 'UTF8') FROM generate_series(1, $2) AS i`,
		b.DispatchSubject("acme"), n)
	if err != nil {
		t.Fatal(err)
	}
}

func streamMsgs(t *testing.T, b *broker.Broker) uint64 {
	t.Helper()
	s, err := b.JetStream().Stream(context.Background(), b.OpsStream())
	if err != nil {
		t.Fatal(err)
	}
	info, err := s.Info(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return info.State.Msgs
}

func unpublished(t *testing.T, pool *pgxpool.Pool) int {
	t.Helper()
	var n int
	if err := pool.QueryRow(context.Background(), `SELECT count(*) FROM outbox WHERE published_at IS NULL`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// waitFor polls cond until it holds or the deadline passes.
func waitFor(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	testpoll.Until(t, timeout, func() error {
		if !cond() {
			return errors.New("still waiting for " + what)
		}
		return nil
	})
}

// waitIdle waits until the started relay rl has taken its listener's
// first wake-up (sent once LISTEN holds), and then found nothing to
// publish and nothing scheduled: a row written after it goes out only on a
// new wake-up or the poll, not on the relay's first looks.
func waitIdle(t *testing.T, rl *relay.Relay) {
	t.Helper()
	// An idle relay that has taken no wake-up yet is at its first look,
	// from before LISTEN held.
	for rl.TestSignals.Idle.WaitOrTimeout() == 0 {
	}
}

// TestRelayCrashBetweenPublishAndDeleteLeavesOneMessagePerRow: a relay
// that dies after JetStream acknowledged its batch and before the delete
// committed leaves every row in the outbox (a row goes only after its
// acknowledgement, with the delete); the next relay publishes them again
// under the same Nats-Msg-Id, JetStream keeps one message per row, and the
// outbox is then empty.
func TestRelayCrashBetweenPublishAndDeleteLeavesOneMessagePerRow(t *testing.T) {
	t.Parallel()
	pool, b := setup(t)
	insertRows(t, pool, b, 5)

	crashing := newRelay(t, pool, b, relay.Config{Logger: quiet()})
	crashing.TestHooks.BeforeDelete = func() error { return errors.New("crash before delete") }
	if _, err := crashing.PublishBatch(context.Background()); err == nil {
		t.Fatal("the crashing batch reported success")
	}
	if got := streamMsgs(t, b); got != 5 {
		t.Fatalf("stream holds %d messages after the crashed batch, want 5 (published, not deleted)", got)
	}
	if got := outboxRows(t, pool); got != 5 {
		t.Fatalf("outbox rows after crash = %d, want 5 (nothing deleted)", got)
	}

	rl := newRelay(t, pool, b, relay.Config{Logger: quiet()})
	if _, err := rl.PublishBatch(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := outboxRows(t, pool); got != 0 {
		t.Errorf("outbox rows after republish = %d, want 0 (published rows are deleted)", got)
	}
	if got := streamMsgs(t, b); got != 5 {
		t.Errorf("stream holds %d messages, want exactly 5", got)
	}
	if got := rl.Stats().Duplicates; got != 5 {
		t.Errorf("duplicates acknowledged = %d, want 5", got)
	}
}

// outboxRows counts every row of the outbox, published or not.
func outboxRows(t *testing.T, pool *pgxpool.Pool) int {
	t.Helper()
	var n int
	if err := pool.QueryRow(context.Background(), `SELECT count(*) FROM outbox`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

func TestTwoRelaysPublishTenThousandRowsExactlyOnce(t *testing.T) {
	t.Parallel()
	pool, b := setup(t)
	const rows = 10_000
	insertRows(t, pool, b, rows)

	ctx := t.Context()
	relays := []*relay.Relay{
		newRelay(t, pool, b, relay.Config{BatchSize: 500, Logger: quiet()}),
		newRelay(t, pool, b, relay.Config{BatchSize: 500, Logger: quiet()}),
	}
	for _, r := range relays {
		if err := r.Start(ctx); err != nil {
			t.Fatal(err)
		}
		defer r.Stop()
	}
	waitFor(t, 60*time.Second, "all rows published", func() bool { return unpublished(t, pool) == 0 })
	for _, r := range relays {
		r.Stop()
	}
	var published, duplicates uint64
	for i, r := range relays {
		s := r.Stats()
		t.Logf("relay %d: published %d, duplicates %d", i, s.Published, s.Duplicates)
		published += s.Published
		duplicates += s.Duplicates
	}
	if published != rows || duplicates != 0 {
		t.Errorf("published %d with %d duplicates, want %d and 0 (no row processed twice)", published, duplicates, rows)
	}
	if got := streamMsgs(t, b); got != rows {
		t.Errorf("stream holds %d messages, want %d", got, rows)
	}
	if got := outboxRows(t, pool); got != 0 {
		t.Errorf("outbox rows after the drain = %d, want 0 (each deleted once published)", got)
	}
	for i, r := range relays {
		if r.Stats().Published == 0 {
			t.Logf("relay %d published nothing (the other drained first)", i)
		}
	}
}

func TestRelayWakesOnNotifyWithoutWaitingForThePoll(t *testing.T) {
	t.Parallel()
	pool, b := setup(t)
	rl := startRelay(t, pool, b, relay.Config{PollInterval: time.Hour, Logger: quiet()})
	notifier := outbox.NewNotifier(pool, quiet())
	if err := notifier.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	defer notifier.Stop()
	// Once the listener holds and the relay has looked, insert in a
	// transaction, as the API does, and signal after the commit.
	waitIdle(t, rl)
	err := pgx.BeginFunc(context.Background(), pool, func(tx pgx.Tx) error {
		return testoutbox.InsertErr(context.Background(), tx, ledger.OutboxMessage{Subject: b.DispatchSubject("acme"), MsgID: "wake-1", Payload: []byte("{}")})
	})
	if err != nil {
		t.Fatal(err)
	}
	notifier.Signal()
	waitFor(t, 10*time.Second, "the row to be published after NOTIFY", func() bool { return unpublished(t, pool) == 0 })
	msg, err := getLast(b)
	if err != nil {
		t.Fatal(err)
	}
	if got := msg.Header.Get(jetstream.MsgIDHeader); got != "wake-1" {
		t.Errorf("Nats-Msg-Id = %q, want wake-1", got)
	}
}

func TestRelayRetriesWhenJetStreamIsDown(t *testing.T) {
	t.Parallel()
	pool, b := setup(t)
	insertRows(t, pool, b, 3)
	// Delete the stream: publishes fail (no responders) as they would
	// while JetStream is unavailable.
	if err := b.DeleteStreams(context.Background()); err != nil {
		t.Fatal(err)
	}
	rl := newRelay(t, pool, b, relay.Config{PublishTimeout: time.Second, Logger: quiet()})
	if _, err := rl.PublishBatch(context.Background()); err == nil {
		t.Fatal("publish to a missing stream reported success")
	}
	if got := unpublished(t, pool); got != 3 {
		t.Fatalf("unpublished = %d, want 3 (nothing lost, nothing deleted)", got)
	}
	// JetStream is back: the same rows go out.
	b2, err := broker.Connect(context.Background(), broker.Config{URL: testnats.URL(), Prefix: b.Prefix(), Logger: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	defer b2.Close()
	if _, err := rl.PublishBatch(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := streamMsgs(t, b); got != 3 {
		t.Errorf("stream holds %d, want 3", got)
	}
}

func getLast(b *broker.Broker) (*jetstream.RawStreamMsg, error) {
	s, err := b.JetStream().Stream(context.Background(), b.OpsStream())
	if err != nil {
		return nil, err
	}
	msg, err := s.GetLastMsgForSubject(context.Background(), b.DispatchSubject("acme"))
	if err != nil {
		return nil, fmt.Errorf("last message: %w", err)
	}
	return msg, nil
}

func TestScheduledRowIsPublishedWhenDueAndNotBefore(t *testing.T) {
	t.Parallel()
	pool, b := setup(t)
	rl := newRelay(t, pool, b, relay.Config{PollInterval: time.Hour, Logger: quiet()})
	due := time.Now().Add(700 * time.Millisecond)
	err := testoutbox.InsertErr(context.Background(), pool, ledger.OutboxMessage{
		Subject: b.DispatchSubject("acme"), MsgID: "later-1", Payload: []byte("{}"), DeliverAfter: due,
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := rl.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	defer rl.Stop()
	waitFor(t, 10*time.Second, "the scheduled row to be published", func() bool { return unpublished(t, pool) == 0 })
	if now := time.Now(); now.Before(due) {
		t.Errorf("published %s before it was due", due.Sub(now))
	}
	if got := streamMsgs(t, b); got != 1 {
		t.Errorf("stream holds %d, want 1", got)
	}
}

// A writer in the relay's own process wakes it directly: the row is
// published with no notification sent through Postgres at all (the
// notifier here never runs).
func TestLocalWakePublishesWithoutANotification(t *testing.T) {
	t.Parallel()
	pool, b := setup(t)
	rl := startRelay(t, pool, b, relay.Config{PollInterval: time.Hour, Logger: quiet()})
	notifier := outbox.NewNotifier(pool, quiet())
	notifier.Local(rl.Wake)
	waitIdle(t, rl) // past the relay's first looks
	err := testoutbox.InsertErr(context.Background(), pool, ledger.OutboxMessage{Subject: b.DispatchSubject("acme"), MsgID: "local-1", Payload: []byte("{}")})
	if err != nil {
		t.Fatal(err)
	}
	notifier.Signal()
	waitFor(t, 5*time.Second, "the row to be published after a local wake", func() bool { return unpublished(t, pool) == 0 })
}

// A busy relay asks for the next scheduled row at most every few dozen
// milliseconds; a row scheduled during a burst of wake-ups that then stops
// is still published when due, not at the next poll an hour later.
func TestScheduledRowWrittenDuringABurstIsPublishedWhenDue(t *testing.T) {
	t.Parallel()
	pool, b := setup(t)
	rl := startRelay(t, pool, b, relay.Config{PollInterval: time.Hour, Logger: quiet()})
	waitIdle(t, rl)
	due := time.Now().Add(400 * time.Millisecond)
	for i := range 10 {
		if i == 5 {
			err := testoutbox.InsertErr(context.Background(), pool, ledger.OutboxMessage{
				Subject: b.DispatchSubject("acme"), MsgID: "burst-later", Payload: []byte("{}"), DeliverAfter: due,
			})
			if err != nil {
				t.Fatal(err)
			}
		}
		rl.Wake()
		time.Sleep(2 * time.Millisecond) // the burst: writers committing apart
	}
	waitFor(t, 5*time.Second, "the scheduled row to be published", func() bool { return unpublished(t, pool) == 0 })
	if now := time.Now(); now.Before(due) {
		t.Errorf("published %s before it was due", due.Sub(now))
	}
}
