// Package broker connects actledger to NATS JetStream and owns the streams.
//
// With no URL it starts an embedded nats-server with JetStream in-process, so
// `actledger serve` runs with zero configuration. Streams are created or
// updated at start from Config, and the server is checked against the
// contract's durability rules (file storage, sync always, 3 replicas): a
// weaker setup is allowed but warned about, never silently accepted.
//
// JetStream is transport, not the record: Postgres decides what happened.
// Nothing in this package decides whether an operation runs.
package broker

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// MinServerVersion is the oldest nats-server actledger supports: the
// jetstream client API it uses (named consumers, pull batches) needs 2.9.
const MinServerVersion = "2.9.0"

// Config configures Connect. Zero values mean the documented defaults.
type Config struct {
	// URL of the NATS server; empty starts an embedded server.
	URL string
	// DataDir is where the embedded server stores JetStream data.
	// Default "./data/nats".
	DataDir string
	// Prefix starts every stream, subject and durable consumer name, so
	// several deployments or test runs share one server. Default "ACTLEDGER".
	Prefix string
	// Replicas of each stream. Default 1; the contract asks 3 in production.
	Replicas int
	// Duplicates is the JetStream duplicate window for Nats-Msg-Id.
	// Default 2m.
	Duplicates time.Duration
	// MaxAge bounds how long messages stay in the streams. Default 7 days.
	MaxAge time.Duration
	// MemoryStorage selects memory instead of file storage (tests only).
	MemoryStorage bool
	// Name is the connection name shown by the server. Default "actledger".
	Name   string
	Logger *slog.Logger
}

// Broker is a connection to JetStream with actledger's streams in place.
type Broker struct {
	cfg      Config
	nc       *nats.Conn
	js       jetstream.JetStream
	embedded *server.Server
	logger   *slog.Logger
}

// ErrServerTooOld is returned when the server is older than MinServerVersion.
var ErrServerTooOld = errors.New("broker: nats-server too old")

// Connect connects to (or starts) the server, checks its version and
// ensures the streams exist with the configured settings.
func Connect(ctx context.Context, cfg Config) (*Broker, error) {
	cfg.DataDir = cmp.Or(cfg.DataDir, "./data/nats")
	cfg.Prefix = cmp.Or(cfg.Prefix, "ACTLEDGER")
	cfg.Replicas = cmp.Or(cfg.Replicas, 1)
	cfg.Duplicates = cmp.Or(cfg.Duplicates, 2*time.Minute)
	cfg.MaxAge = cmp.Or(cfg.MaxAge, 7*24*time.Hour)
	cfg.Name = cmp.Or(cfg.Name, "actledger")
	logger := cmp.Or(cfg.Logger, slog.Default())
	if strings.ContainsAny(cfg.Prefix, ".*> \t") {
		return nil, fmt.Errorf("broker: stream prefix %q must not contain '.', '*', '>' or spaces", cfg.Prefix)
	}

	b := &Broker{cfg: cfg, logger: logger}
	opts := []nats.Option{
		nats.Name(cfg.Name),
		nats.MaxReconnects(-1),
		nats.ReconnectWait(250 * time.Millisecond),
		nats.DisconnectErrHandler(func(_ *nats.Conn, err error) {
			if err != nil {
				logger.Warn("nats disconnected", "err", err)
			}
		}),
		nats.ReconnectHandler(func(nc *nats.Conn) { logger.Info("nats reconnected", "url", nc.ConnectedUrlRedacted()) }),
	}
	url := cfg.URL
	if url == "" {
		ns, err := startEmbedded(cfg.DataDir)
		if err != nil {
			return nil, err
		}
		b.embedded = ns
		url = ns.ClientURL()
		opts = append(opts, nats.InProcessServer(ns))
		logger.Info("started embedded JetStream", "data_dir", cfg.DataDir, "sync", "always")
	}
	nc, err := nats.Connect(url, opts...)
	if err != nil {
		b.Close()
		return nil, fmt.Errorf("broker: connect to %s: %w", url, err)
	}
	b.nc = nc
	if err := checkVersion(nc.ConnectedServerVersion()); err != nil {
		b.Close()
		return nil, err
	}
	js, err := jetstream.New(nc, jetstream.WithPublishAsyncMaxPending(4096))
	if err != nil {
		b.Close()
		return nil, fmt.Errorf("broker: jetstream: %w", err)
	}
	b.js = js
	if err := b.ensureStreams(ctx); err != nil {
		b.Close()
		return nil, err
	}
	b.warnDurability(ctx)
	return b, nil
}

func startEmbedded(dir string) (*server.Server, error) {
	ns, err := server.NewServer(&server.Options{
		ServerName: "actledger-embedded",
		Host:       "127.0.0.1",
		Port:       server.RANDOM_PORT,
		JetStream:  true,
		StoreDir:   dir,
		SyncAlways: true,
		NoSigs:     true,
		NoLog:      true,
	})
	if err != nil {
		return nil, fmt.Errorf("broker: embedded server: %w", err)
	}
	ns.Start()
	if !ns.ReadyForConnections(15 * time.Second) {
		ns.Shutdown()
		return nil, fmt.Errorf("broker: embedded server did not start (data dir %s)", dir)
	}
	return ns, nil
}

// checkVersion refuses servers older than MinServerVersion with a message
// that says what to do.
func checkVersion(v string) error {
	if versionAtLeast(v, MinServerVersion) {
		return nil
	}
	return fmt.Errorf("%w: server is %s, actledger needs nats-server %s or newer with JetStream enabled (-js); upgrade the server or leave NATS_URL empty to use the embedded one",
		ErrServerTooOld, v, MinServerVersion)
}

func versionAtLeast(have, want string) bool {
	h, w := versionParts(have), versionParts(want)
	for i := range 3 {
		if h[i] != w[i] {
			return h[i] > w[i]
		}
	}
	return true
}

func versionParts(v string) [3]int {
	var out [3]int
	v = strings.TrimPrefix(v, "v")
	if i := strings.IndexAny(v, "-+"); i >= 0 {
		v = v[:i]
	}
	for i, p := range strings.SplitN(v, ".", 3) {
		out[i], _ = strconv.Atoi(p)
	}
	return out
}

// JetStream returns the JetStream context.
func (b *Broker) JetStream() jetstream.JetStream { return b.js }

// Conn returns the underlying connection.
func (b *Broker) Conn() *nats.Conn { return b.nc }

// Prefix returns the stream/subject/consumer prefix.
func (b *Broker) Prefix() string { return b.cfg.Prefix }

// ServerVersion returns the connected server's version.
func (b *Broker) ServerVersion() string { return b.nc.ConnectedServerVersion() }

// Embedded reports whether the broker runs its own in-process server.
func (b *Broker) Embedded() bool { return b.embedded != nil }

// Ping checks that JetStream answers; /readyz uses it.
func (b *Broker) Ping(ctx context.Context) error {
	if _, err := b.js.AccountInfo(ctx); err != nil {
		return fmt.Errorf("broker: jetstream not answering: %w", err)
	}
	return nil
}

// Close drains the connection and stops the embedded server, if any.
func (b *Broker) Close() {
	if b.nc != nil {
		_ = b.nc.Drain()
		for i := 0; i < 50 && !b.nc.IsClosed(); i++ {
			time.Sleep(20 * time.Millisecond)
		}
		b.nc.Close()
	}
	if b.embedded != nil {
		b.embedded.Shutdown()
		b.embedded.WaitForShutdown()
	}
}
