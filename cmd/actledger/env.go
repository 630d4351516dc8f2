package main

import (
	"cmp"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/actledger/actledger/api"
	"github.com/actledger/actledger/auth"
	"github.com/actledger/actledger/broker"
	"github.com/actledger/actledger/retention"
)

// defaultListenAddr is LISTEN_ADDR's default: loopback only, so a first
// run exposes nothing.
const defaultListenAddr = "127.0.0.1:8080"

// env is the configuration read from the environment. A variable left
// unset stays zero here and the component it configures applies its own
// default (broker.DefaultDataDir, dispatcher.DefaultLeaseDuration, ...), so
// each default is written once.
type env struct {
	DatabaseURL string // empty: find or start a local Postgres (localpg)
	NATSURL     string // empty: embedded JetStream
	NATSDataDir string
	// NATS credentials and TLS for a remote server (broker.Config):
	// NATS_CREDS, NATS_USER/NATS_PASSWORD, NATS_NKEY, NATS_CA. The
	// password is never logged.
	NATSCreds, NATSUser, NATSPassword, NATSNkey, NATSCA string
	// EvidenceUnappliedAfter (EVIDENCE_UNAPPLIED_AFTER) is how long stored
	// evidence may wait for its message before the reconciler applies it
	// from Postgres (0: reconciler.DefaultUnappliedAfter).
	EvidenceUnappliedAfter time.Duration
	// TokenCacheTTL (TOKEN_CACHE_TTL) is how long an agent token is
	// trusted without a query (0: auth.DefaultCacheTTL; "off", any case:
	// auth.NoCache, every request asks the database).
	TokenCacheTTL time.Duration
	ListenAddr    string
	ProvidersFile string
	LeaseDuration time.Duration
	// DispatchConcurrency is the per-provider worker count (0:
	// dispatcher.DefaultConcurrency).
	DispatchConcurrency int
	// StreamReplicas is the replica count of every stream (0:
	// broker.DefaultReplicas).
	StreamReplicas int
	StreamPrefix   string
	// MCPAllowedOrigins (MCP_ALLOWED_ORIGINS, comma-separated) are the
	// browser origins besides the server's own that may POST /mcp
	// (api.Config.MCPAllowedOrigins).
	MCPAllowedOrigins []string
	// MCPAllowedHosts (MCP_ALLOWED_HOSTS, comma-separated) are the host
	// names besides the loopback ones that a POST /mcp may name in its
	// Host (api.Config.MCPAllowedHosts).
	MCPAllowedHosts []string
	// ConsoleURL (CONSOLE_URL) is the console's address as the people a
	// notification reaches open it; empty: http://$LISTEN_ADDR/console.
	ConsoleURL string
	// NotifyTimeout (NOTIFY_TIMEOUT), NotifyRetryFor (NOTIFY_RETRY_FOR)
	// and NotifyConcurrency (NOTIFY_CONCURRENCY) are the notification
	// worker's attempt timeout, retry window and requests in flight per
	// receiver (0: notify's defaults).
	NotifyTimeout, NotifyRetryFor time.Duration
	NotifyConcurrency             int
	LogLevel                      slog.Level
	// Retention (RETENTION_OLDER_THAN, RETENTION_ARCHIVE,
	// RETENTION_INTERVAL) makes serve prune: terminal operations
	// unchanged for longer than OlderThan ("90d", "36h") are archived to
	// the directory Archive ("-": standard output), then deleted, every
	// Interval (default retention.DefaultInterval). OlderThan unset: keep
	// everything.
	Retention retention.Config
	// Getenv reads further variables the config names (webhook secrets).
	Getenv func(string) string
}

// loadEnv reads the environment. Every value that is set and unusable is
// an error naming its variable: a typo must stop the process, not turn
// silently into a default.
func loadEnv(getenv func(string) string) (env, error) {
	e := env{
		DatabaseURL:   getenv("DATABASE_URL"),
		NATSURL:       getenv("NATS_URL"),
		NATSDataDir:   getenv("NATS_DATA_DIR"),
		NATSCreds:     getenv("NATS_CREDS"),
		NATSUser:      getenv("NATS_USER"),
		NATSPassword:  getenv("NATS_PASSWORD"),
		NATSNkey:      getenv("NATS_NKEY"),
		NATSCA:        getenv("NATS_CA"),
		ListenAddr:    cmp.Or(getenv("LISTEN_ADDR"), defaultListenAddr),
		ProvidersFile: getenv("PROVIDERS_FILE"),
		StreamPrefix:  getenv("STREAM_PREFIX"),
		ConsoleURL:    getenv("CONSOLE_URL"),
		Getenv:        getenv,
	}
	var errs []error
	duration := func(name string, into *time.Duration) {
		v := getenv(name)
		if v == "" {
			return
		}
		d, err := time.ParseDuration(v)
		if err != nil || d <= 0 {
			errs = append(errs, fmt.Errorf("%s=%q: not a positive duration such as 30s", name, v))
			return
		}
		*into = d
	}
	positive := func(name string, into *int) {
		v := getenv(name)
		if v == "" {
			return
		}
		n, err := strconv.Atoi(v)
		if err != nil || n <= 0 {
			errs = append(errs, fmt.Errorf("%s=%q: not a positive whole number", name, v))
			return
		}
		*into = n
	}
	if _, _, err := net.SplitHostPort(e.ListenAddr); err != nil {
		errs = append(errs, fmt.Errorf("LISTEN_ADDR=%q: not host:port such as 127.0.0.1:8080: %w", e.ListenAddr, err))
	}
	if err := broker.CheckPrefix(e.StreamPrefix); err != nil {
		errs = append(errs, fmt.Errorf("STREAM_PREFIX=%q: %w", e.StreamPrefix, err))
	}
	duration("LEASE_DURATION", &e.LeaseDuration)
	duration("EVIDENCE_UNAPPLIED_AFTER", &e.EvidenceUnappliedAfter)
	if v := getenv("TOKEN_CACHE_TTL"); v != "" {
		d, err := time.ParseDuration(v)
		switch {
		case strings.EqualFold(v, "off"):
			e.TokenCacheTTL = auth.NoCache
		case err != nil || d <= 0 || d > auth.MaxCacheTTL:
			errs = append(errs, fmt.Errorf("TOKEN_CACHE_TTL=%q: neither off nor a positive duration of at most %s such as 1s", v, auth.MaxCacheTTL))
		default:
			e.TokenCacheTTL = d
		}
	}
	origins := getenv("MCP_ALLOWED_ORIGINS")
	for origin := range strings.SplitSeq(origins, ",") {
		if origin = strings.TrimSpace(origin); origin == "" {
			continue
		}
		if err := http.NewCrossOriginProtection().AddTrustedOrigin(origin); err != nil {
			errs = append(errs, fmt.Errorf("MCP_ALLOWED_ORIGINS=%q: %q is not an origin such as https://agents.example.com: %w", origins, origin, err))
			continue
		}
		e.MCPAllowedOrigins = append(e.MCPAllowedOrigins, origin)
	}
	hosts := getenv("MCP_ALLOWED_HOSTS")
	for host := range strings.SplitSeq(hosts, ",") {
		if host = strings.TrimSpace(host); host == "" {
			continue
		}
		if _, err := api.ParseMCPHost(host); err != nil {
			errs = append(errs, fmt.Errorf("MCP_ALLOWED_HOSTS=%q: %w", hosts, err))
			continue
		}
		e.MCPAllowedHosts = append(e.MCPAllowedHosts, host)
	}
	if v := getenv("RETENTION_OLDER_THAN"); v != "" {
		d, err := retention.ParseDuration(v)
		if err != nil {
			errs = append(errs, fmt.Errorf("RETENTION_OLDER_THAN=%q: %w", v, err))
		}
		e.Retention.OlderThan = d
		if e.Retention.Archive = getenv("RETENTION_ARCHIVE"); e.Retention.Archive == "" {
			errs = append(errs, fmt.Errorf("RETENTION_OLDER_THAN=%q is set without RETENTION_ARCHIVE: a pruned operation must be archived first (a directory, or - for standard output)", v))
		}
	}
	duration("RETENTION_INTERVAL", &e.Retention.Interval)
	positive("DISPATCH_CONCURRENCY", &e.DispatchConcurrency)
	positive("NOTIFY_CONCURRENCY", &e.NotifyConcurrency)
	duration("NOTIFY_TIMEOUT", &e.NotifyTimeout)
	duration("NOTIFY_RETRY_FOR", &e.NotifyRetryFor)
	if e.ConsoleURL != "" {
		if u, err := url.Parse(e.ConsoleURL); err != nil || u.Host == "" || (u.Scheme != "http" && u.Scheme != "https") {
			errs = append(errs, fmt.Errorf("CONSOLE_URL=%q: not an http(s) URL such as https://actledger.example.com/console", e.ConsoleURL))
		}
	}
	positive("STREAM_REPLICAS", &e.StreamReplicas)
	if v := getenv("LOG_LEVEL"); v != "" {
		if err := e.LogLevel.UnmarshalText([]byte(v)); err != nil {
			errs = append(errs, fmt.Errorf("LOG_LEVEL=%q: none of %s", v, strings.Join(logLevels, ", ")))
		}
	}
	return e, errors.Join(errs...)
}

// logLevels are the values LOG_LEVEL takes (any case).
var logLevels = []string{"debug", "info", "warn", "error"}

// consoleURL is where notifications link to: CONSOLE_URL, or the console
// of this listener.
func (e env) consoleURL() string {
	return cmp.Or(e.ConsoleURL, "http://"+e.ListenAddr+"/console")
}
