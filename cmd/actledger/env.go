package main

import (
	"cmp"
	"log/slog"
	"strconv"
	"time"
)

// env is the configuration read from the environment, with the contract's
// defaults.
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
	// from Postgres (0: the reconciler's default, 30s).
	EvidenceUnappliedAfter time.Duration
	ListenAddr             string
	ProvidersFile          string
	LeaseDuration          time.Duration
	// DispatchConcurrency is the per-provider worker count (0: default).
	DispatchConcurrency int
	// StreamReplicas is the replica count of every stream (0: 1).
	StreamReplicas int
	StreamPrefix   string
	LogLevel       slog.Level
	// Getenv reads further variables the config names (webhook secrets).
	Getenv   func(string) string
	badLease string
	// badDurations names duration variables that are set but unusable.
	badDurations []string
}

func loadEnv(getenv func(string) string) env {
	e := env{
		DatabaseURL:   getenv("DATABASE_URL"),
		NATSURL:       getenv("NATS_URL"),
		NATSDataDir:   cmp.Or(getenv("NATS_DATA_DIR"), "./data/nats"),
		NATSCreds:     getenv("NATS_CREDS"),
		NATSUser:      getenv("NATS_USER"),
		NATSPassword:  getenv("NATS_PASSWORD"),
		NATSNkey:      getenv("NATS_NKEY"),
		NATSCA:        getenv("NATS_CA"),
		ListenAddr:    cmp.Or(getenv("LISTEN_ADDR"), "127.0.0.1:8080"),
		ProvidersFile: getenv("PROVIDERS_FILE"),
		LeaseDuration: 30 * time.Second,
		StreamPrefix:  cmp.Or(getenv("STREAM_PREFIX"), "ACTLEDGER"),
		Getenv:        getenv,
	}
	if v := getenv("LEASE_DURATION"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d <= 0 {
			e.badLease = v
		} else {
			e.LeaseDuration = d
		}
	}
	if v := getenv("EVIDENCE_UNAPPLIED_AFTER"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d <= 0 {
			e.badDurations = append(e.badDurations, "EVIDENCE_UNAPPLIED_AFTER="+strconv.Quote(v))
		} else {
			e.EvidenceUnappliedAfter = d
		}
	}
	e.DispatchConcurrency = positiveInt(getenv("DISPATCH_CONCURRENCY"))
	e.StreamReplicas = positiveInt(getenv("STREAM_REPLICAS"))
	if getenv("LOG_LEVEL") == "debug" {
		e.LogLevel = slog.LevelDebug
	}
	return e
}

// positiveInt parses v, or returns 0 (the default) when v is empty or not a
// positive integer.
func positiveInt(v string) int {
	n, err := strconv.Atoi(v)
	if err != nil || n < 0 {
		return 0
	}
	return n
}
