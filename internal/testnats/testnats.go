// Package testnats gives each test its own set of actledger streams on the
// real NATS server named by TEST_NATS_URL (default nats://127.0.0.1:4222).
// Stream names carry a unique prefix and are deleted when the test ends, so
// tests run in parallel against one server and leave nothing behind.
package testnats

import (
	"context"
	"log/slog"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/actledger/actledger/broker"
)

// DefaultURL is used when TEST_NATS_URL is unset.
const DefaultURL = "nats://127.0.0.1:4222"

// URL returns the server tests use.
func URL() string {
	if u := os.Getenv("TEST_NATS_URL"); u != "" {
		return u
	}
	return DefaultURL
}

// Prefix returns a prefix unique to one test.
func Prefix() string {
	return "T" + strings.ToUpper(strings.ReplaceAll(uuid.NewString(), "-", "")[:12])
}

// anchorStream is one empty stream that tests never delete. nats-server
// 2.9 removes an account's stream directory when its last file-storage
// stream is deleted, and a stream created at that moment fails ("error
// creating store for stream"); parallel test packages create and delete
// streams all the time, so the anchor keeps the directory in place.
const anchorStream = "ACTLEDGER_TEST_ANCHOR"

// Anchor makes sure the anchor stream exists; tests that connect to the
// server without New call it first.
func Anchor(t testing.TB) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := ensureAnchor(ctx); err != nil {
		t.Fatalf("testnats: connect to %s (is nats-server -js running? set TEST_NATS_URL): %v", URL(), err)
	}
}

func ensureAnchor(ctx context.Context) error {
	nc, err := nats.Connect(URL())
	if err != nil {
		return err
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return err
	}
	_, err = js.CreateOrUpdateStream(ctx, jetstream.StreamConfig{
		Name: anchorStream, Subjects: []string{"actledger-test-anchor"}, Storage: jetstream.FileStorage,
	})
	return err
}

// New connects a broker with a unique prefix and removes its streams when t
// ends.
func New(t testing.TB) *broker.Broker {
	t.Helper()
	return NewWith(t, broker.Config{})
}

// NewWith is New with cfg's stream settings (a short Duplicates window, for
// a test that publishes a message id again); URL, Prefix and Logger are
// New's.
func NewWith(t testing.TB, cfg broker.Config) *broker.Broker {
	t.Helper()
	Anchor(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cfg.URL, cfg.Prefix, cfg.Logger = URL(), Prefix(), slog.New(slog.DiscardHandler)
	b, err := broker.Connect(ctx, cfg)
	if err != nil {
		t.Fatalf("testnats: connect to %s (is nats-server -js running? set TEST_NATS_URL): %v", URL(), err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := b.DeleteStreams(ctx); err != nil {
			t.Errorf("testnats: %v", err)
		}
		b.Close()
	})
	return b
}
