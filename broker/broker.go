// Package broker connects actledger to NATS JetStream and owns the streams.
//
// With no URL it starts an embedded nats-server with JetStream in-process, so
// `actledger serve` runs with zero configuration. The embedded server accepts
// no network connection at all (no TCP port): only this process reaches it,
// so nobody else can publish into its streams. A remote server is reached
// with credentials (a creds file, a user and password, or an nkey seed) and
// TLS when its URL says tls://. Streams are created or
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
	"net/url"
	"os"
	"regexp"
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

// PullExpiry is how long a consumer's pull request lives. The JetStream
// client sends heartbeats at half of it and pulls again after two missed
// ones, so it bounds how long a consumer stays silent after its pull was
// lost: when the whole cluster restarts, the pull sent on reconnect reaches
// a server whose consumer has no leader yet and is dropped, and with the
// client's default of 30 s the dispatchers sat idle for half a minute
// after NATS was back (cluster.TestWholeClusterDownAPIKeepsAccepting). An
// idle consumer pays one pull request per PullExpiry.
const PullExpiry = 5 * time.Second

// Defaults of Config, applied by Connect to the zero fields.
const (
	DefaultDataDir    = "./data/nats"
	DefaultPrefix     = "ACTLEDGER"
	DefaultReplicas   = 1
	DefaultDuplicates = 2 * time.Minute
	DefaultMaxAge     = 7 * 24 * time.Hour
	DefaultName       = "actledger"
)

// Config configures Connect. Zero values mean the documented defaults.
type Config struct {
	// URL of the NATS server; empty starts an embedded server.
	URL string
	// DataDir is where the embedded server stores JetStream data.
	// Default DefaultDataDir.
	DataDir string
	// Prefix starts every stream, subject and durable consumer name, so
	// several deployments or test runs share one server. It must not
	// contain '.', '*', '>' or spaces. Default DefaultPrefix.
	Prefix string
	// Replicas of each stream. Default DefaultReplicas; the contract asks
	// 3 in production.
	Replicas int
	// Duplicates is the JetStream duplicate window for Nats-Msg-Id.
	// Default DefaultDuplicates.
	Duplicates time.Duration
	// MaxAge bounds how long messages stay in the streams. Default
	// DefaultMaxAge.
	MaxAge time.Duration
	// MemoryStorage selects memory instead of file storage (tests only).
	MemoryStorage bool
	// Name is the connection name shown by the server. Default
	// DefaultName.
	Name string

	// Credentials for a remote server (URL set); at most one kind may be
	// given, and none with the embedded server, which takes no network
	// connections. A server that requires them refuses a connection
	// without: anyone who can reach it could otherwise publish evidence.

	// CredsFile is a NATS credentials file (user JWT and nkey seed), as
	// issued by an operator/account setup (env NATS_CREDS).
	CredsFile string
	// User and Password authenticate with a user of the server's config
	// (env NATS_USER, NATS_PASSWORD). Password is never logged.
	User     string
	Password string
	// NkeyFile is a file holding a user nkey seed ("SU..."), whose public
	// key the server's config lists (env NATS_NKEY).
	NkeyFile string
	// CAFile is a PEM file of the certificate authority that signed the
	// server's certificate, for TLS with a private CA (env NATS_CA). TLS
	// itself is on when the URL's scheme is tls:// (or the server requires
	// it); the system roots are used when CAFile is empty.
	CAFile string

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
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	logger := cmp.Or(cfg.Logger, slog.Default())

	auth, err := cfg.authOptions()
	if err != nil {
		return nil, err
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
	opts = append(opts, auth...)
	url := cfg.URL
	if url == "" {
		ns, err := startEmbedded(cfg.DataDir)
		if err != nil {
			return nil, err
		}
		b.embedded = ns
		url = ns.ClientURL()
		opts = append(opts, nats.InProcessServer(ns))
		logger.Info("started embedded JetStream (in-process only, no network port)", "data_dir", cfg.DataDir, "sync", "always")
	}
	nc, err := nats.Connect(url, opts...)
	if err != nil {
		b.Close()
		return nil, connectError(redactURLs(url), cfg, err)
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
	if cfg.URL != "" && !cfg.hasCredentials() {
		// The contract reaches a remote server with credentials; one
		// that takes anyone lets anyone publish pointers into the streams.
		logger.Warn("connected to NATS without credentials: whoever reaches the server can publish to actledger's streams; production sets NATS_CREDS, NATS_USER and NATS_PASSWORD, or NATS_NKEY",
			"url", redactURLs(cfg.URL))
	}
	return b, nil
}

// hasCredentials reports whether the connection presents credentials: a
// credentials or nkey file, a user, or a user in one of the URLs.
func (cfg Config) hasCredentials() bool {
	if cfg.CredsFile != "" || cfg.User != "" || cfg.NkeyFile != "" {
		return true
	}
	for _, raw := range strings.Split(cfg.URL, ",") {
		if u, err := url.Parse(strings.TrimSpace(raw)); err == nil && u.User != nil {
			return true
		}
	}
	return false
}

// startEmbedded starts a JetStream server that listens on no port
// (DontListen): the broker reaches it in-process (nats.InProcessServer), and
// no other process, local or remote, can connect to it.
func startEmbedded(dir string) (*server.Server, error) {
	ns, err := server.NewServer(&server.Options{
		ServerName: "actledger-embedded",
		DontListen: true,
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

// withDefaults fills the zero fields with the defaults.
func (cfg Config) withDefaults() Config {
	cfg.DataDir = cmp.Or(cfg.DataDir, DefaultDataDir)
	cfg.Prefix = cmp.Or(cfg.Prefix, DefaultPrefix)
	cfg.Replicas = cmp.Or(cfg.Replicas, DefaultReplicas)
	cfg.Duplicates = cmp.Or(cfg.Duplicates, DefaultDuplicates)
	cfg.MaxAge = cmp.Or(cfg.MaxAge, DefaultMaxAge)
	cfg.Name = cmp.Or(cfg.Name, DefaultName)
	return cfg
}

// CheckPrefix reports whether prefix can start stream, subject and
// consumer names: NATS reads '.' as a subject separator and '*', '>' as
// wildcards, and names take no spaces. It is exported so that a prefix
// from the environment is refused naming its variable, before anything
// connects.
func CheckPrefix(prefix string) error {
	if strings.ContainsAny(prefix, ".*> \t") {
		return fmt.Errorf("prefix %q must not contain '.', '*', '>' or spaces", prefix)
	}
	return nil
}

// validate reports the first unusable field of a config with defaults
// applied, by name. Credentials are checked by authOptions.
func (cfg Config) validate() error {
	if err := CheckPrefix(cfg.Prefix); err != nil {
		return fmt.Errorf("broker: Config.Prefix: %w", err)
	}
	switch {
	case cfg.Replicas <= 0:
		return fmt.Errorf("broker: Config.Replicas %d must be positive", cfg.Replicas)
	case cfg.Duplicates <= 0:
		return fmt.Errorf("broker: Config.Duplicates %s must be positive", cfg.Duplicates)
	case cfg.MaxAge <= 0:
		return fmt.Errorf("broker: Config.MaxAge %s must be positive", cfg.MaxAge)
	}
	return nil
}

// authOptions turns the configured credentials into connect options,
// refusing combinations that cannot be meant and files that are not
// there, with errors naming the environment variables an operator sets.
func (cfg Config) authOptions() ([]nats.Option, error) {
	var kinds []string
	if cfg.CredsFile != "" {
		kinds = append(kinds, "NATS_CREDS")
	}
	if cfg.User != "" || cfg.Password != "" {
		kinds = append(kinds, "NATS_USER/NATS_PASSWORD")
	}
	if cfg.NkeyFile != "" {
		kinds = append(kinds, "NATS_NKEY")
	}
	switch {
	case len(kinds) > 1:
		return nil, fmt.Errorf("broker: %s are set: give one kind of NATS credentials", strings.Join(kinds, " and "))
	case cfg.URL == "" && (len(kinds) > 0 || cfg.CAFile != ""):
		return nil, errors.New("broker: NATS credentials or NATS_CA are set but NATS_URL is empty: the embedded server takes no network connections and needs none; set NATS_URL to use a remote server")
	case (cfg.User == "") != (cfg.Password == ""):
		return nil, errors.New("broker: NATS_USER and NATS_PASSWORD go together: set both or neither")
	}
	for _, f := range []struct{ env, path string }{{"NATS_CREDS", cfg.CredsFile}, {"NATS_NKEY", cfg.NkeyFile}, {"NATS_CA", cfg.CAFile}} {
		if f.path == "" {
			continue
		}
		if _, err := os.Stat(f.path); err != nil {
			return nil, fmt.Errorf("broker: %s: %w", f.env, err)
		}
	}
	var opts []nats.Option
	switch {
	case cfg.CredsFile != "":
		opts = append(opts, nats.UserCredentials(cfg.CredsFile))
	case cfg.User != "":
		opts = append(opts, nats.UserInfo(cfg.User, cfg.Password))
	case cfg.NkeyFile != "":
		opt, err := nats.NkeyOptionFromSeed(cfg.NkeyFile)
		if err != nil {
			return nil, fmt.Errorf("broker: NATS_NKEY %s is not an nkey seed file: %w", cfg.NkeyFile, err)
		}
		opts = append(opts, opt)
	}
	if cfg.CAFile != "" {
		opts = append(opts, nats.RootCAs(cfg.CAFile))
	}
	return opts, nil
}

// connectError says why a connection failed and what to do, naming the
// server without any password a URL may carry (nats.go's own errors may
// quote the URL as given).
func connectError(url string, cfg Config, err error) error {
	if errors.Is(err, nats.ErrAuthorization) {
		given := "no credentials were given"
		switch {
		case cfg.CredsFile != "":
			given = "NATS_CREDS was given"
		case cfg.User != "":
			given = "NATS_USER/NATS_PASSWORD were given"
		case cfg.NkeyFile != "":
			given = "NATS_NKEY was given"
		}
		err = fmt.Errorf("broker: %s refused the connection (%s): set NATS_CREDS, NATS_USER and NATS_PASSWORD, or NATS_NKEY to a user the server knows: %w", url, given, err)
	} else {
		err = fmt.Errorf("broker: connect to %s: %w", url, err)
	}
	return redactedError{msg: urlPassword.ReplaceAllString(err.Error(), "${1}xxxxx@"), err: err}
}

// urlPassword finds the password of a URL's user info in free text.
var urlPassword = regexp.MustCompile(`(://[^:/@\s]*:)[^@\s]*@`)

// redactedError is err with a message that shows no password; errors.Is
// and errors.As still see err.
type redactedError struct {
	msg string
	err error
}

func (e redactedError) Error() string { return e.msg }
func (e redactedError) Unwrap() error { return e.err }

// redactURLs replaces passwords in a comma-separated server list.
func redactURLs(urls string) string {
	return urlPassword.ReplaceAllString(urls, "${1}xxxxx@")
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
