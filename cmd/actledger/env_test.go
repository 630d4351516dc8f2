package main

import (
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/actledger/actledger/auth"
)

// Every variable loadEnv reads: a usable value lands in its field, an
// unusable one is an error naming the variable (a bad DISPATCH_CONCURRENCY
// used to become the default without a word).
func TestLoadEnvFailsOnABadValueNamingTheVariable(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, value string
		check       func(env) bool // for a usable value
		wantErr     bool
	}{
		{"DATABASE_URL", "postgres://db/x", func(e env) bool { return e.DatabaseURL == "postgres://db/x" }, false},
		{"NATS_URL", "nats://n:4222", func(e env) bool { return e.NATSURL == "nats://n:4222" }, false},
		{"NATS_DATA_DIR", "/var/nats", func(e env) bool { return e.NATSDataDir == "/var/nats" }, false},
		{"NATS_CREDS", "/c", func(e env) bool { return e.NATSCreds == "/c" }, false},
		{"NATS_USER", "u", func(e env) bool { return e.NATSUser == "u" }, false},
		{"NATS_PASSWORD", "p", func(e env) bool { return e.NATSPassword == "p" }, false},
		{"NATS_NKEY", "/k", func(e env) bool { return e.NATSNkey == "/k" }, false},
		{"NATS_CA", "/ca", func(e env) bool { return e.NATSCA == "/ca" }, false},
		{"LISTEN_ADDR", ":9", func(e env) bool { return e.ListenAddr == ":9" }, false},
		{"LISTEN_ADDR", "8080", nil, true},
		{"LISTEN_ADDR", "bogus", nil, true},
		{"PROVIDERS_FILE", "p.yaml", func(e env) bool { return e.ProvidersFile == "p.yaml" }, false},
		{"STREAM_PREFIX", "X", func(e env) bool { return e.StreamPrefix == "X" }, false},
		{"STREAM_PREFIX", "A.B", nil, true},
		{"STREAM_PREFIX", "A B", nil, true},
		{"STREAM_PREFIX", "A>", nil, true},
		{"LEASE_DURATION", "45s", func(e env) bool { return e.LeaseDuration == 45*time.Second }, false},
		{"LEASE_DURATION", "30", nil, true},
		{"LEASE_DURATION", "-5s", nil, true},
		{"LEASE_DURATION", "0s", nil, true},
		{"EVIDENCE_UNAPPLIED_AFTER", "1m", func(e env) bool { return e.EvidenceUnappliedAfter == time.Minute }, false},
		{"EVIDENCE_UNAPPLIED_AFTER", "soon", nil, true},
		{"TOKEN_CACHE_TTL", "250ms", func(e env) bool { return e.TokenCacheTTL == 250*time.Millisecond }, false},
		{"TOKEN_CACHE_TTL", "off", func(e env) bool { return e.TokenCacheTTL == auth.NoCache }, false},
		{"TOKEN_CACHE_TTL", "soon", nil, true},
		{"TOKEN_CACHE_TTL", "0s", nil, true},
		{"TOKEN_CACHE_TTL", "-1s", nil, true},
		{"TOKEN_CACHE_TTL", "1h", nil, true},
		{"TOKEN_CACHE_TTL", "OFF", func(e env) bool { return e.TokenCacheTTL == auth.NoCache }, false},
		{"DISPATCH_CONCURRENCY", "8", func(e env) bool { return e.DispatchConcurrency == 8 }, false},
		{"DISPATCH_CONCURRENCY", "eight", nil, true},
		{"DISPATCH_CONCURRENCY", "0", nil, true},
		{"DISPATCH_CONCURRENCY", "-1", nil, true},
		{"STREAM_REPLICAS", "3", func(e env) bool { return e.StreamReplicas == 3 }, false},
		{"STREAM_REPLICAS", "three", nil, true},
		{"STREAM_REPLICAS", "0", nil, true},
		{"LOG_LEVEL", "debug", func(e env) bool { return e.LogLevel == slog.LevelDebug }, false},
		{"LOG_LEVEL", "WARN", func(e env) bool { return e.LogLevel == slog.LevelWarn }, false},
		{"LOG_LEVEL", "verbose", nil, true},
		{"MCP_ALLOWED_ORIGINS", "https://a.example.com, http://127.0.0.1:3000", func(e env) bool {
			return slices.Equal(e.MCPAllowedOrigins, []string{"https://a.example.com", "http://127.0.0.1:3000"})
		}, false},
		{"MCP_ALLOWED_ORIGINS", "https://a.example.com/path", nil, true},
		{"MCP_ALLOWED_ORIGINS", "a.example.com", nil, true},
		{"MCP_ALLOWED_HOSTS", "agents.example.com, 10.0.0.5,[fd00::1]", func(e env) bool {
			return slices.Equal(e.MCPAllowedHosts, []string{"agents.example.com", "10.0.0.5", "[fd00::1]"})
		}, false},
		{"MCP_ALLOWED_HOSTS", "https://agents.example.com", nil, true},
		{"MCP_ALLOWED_HOSTS", "agents.example.com:443", nil, true},
		{"MCP_ALLOWED_HOSTS", "*.example.com", nil, true},
		{"MCP_ALLOWED_HOSTS", "fd00::1", nil, true},
		{"RETENTION_OLDER_THAN", "90d", nil, true}, // without RETENTION_ARCHIVE
		{"RETENTION_OLDER_THAN", "90 days", nil, true},
		{"RETENTION_INTERVAL", "30m", func(e env) bool { return e.Retention.Interval == 30*time.Minute }, false},
		{"RETENTION_INTERVAL", "30", nil, true},
	}
	for _, tt := range tests {
		t.Run(tt.name+"="+tt.value, func(t *testing.T) {
			t.Parallel()
			e, err := loadEnv(func(k string) string {
				if k == tt.name {
					return tt.value
				}
				return ""
			})
			if tt.wantErr {
				if err == nil || !strings.Contains(err.Error(), tt.name+"=") {
					t.Fatalf("loadEnv: %v, want an error naming %s", err, tt.name)
				}
				return
			}
			if err != nil {
				t.Fatalf("loadEnv: %v", err)
			}
			if !tt.check(e) {
				t.Errorf("%s=%q not read: %+v", tt.name, tt.value, e)
			}
		})
	}
}

// Unset variables stay zero, so each component applies its own default.
func TestLoadEnvLeavesUnsetVariablesToTheComponentDefaults(t *testing.T) {
	t.Parallel()
	e, err := loadEnv(func(string) string { return "" })
	if err != nil {
		t.Fatal(err)
	}
	if e.LeaseDuration != 0 || e.TokenCacheTTL != 0 || e.DispatchConcurrency != 0 || e.StreamReplicas != 0 || e.NATSDataDir != "" || e.StreamPrefix != "" {
		t.Errorf("defaults written in env: %+v", e)
	}
	if e.ListenAddr != defaultListenAddr || e.LogLevel != slog.LevelInfo {
		t.Errorf("ListenAddr %q LogLevel %s, want %q and info", e.ListenAddr, e.LogLevel, defaultListenAddr)
	}
}

// A bad value stops every command that uses the environment, before it
// touches a database.
func TestRunRefusesABadDispatchConcurrency(t *testing.T) {
	t.Parallel()
	getenv := func(k string) string {
		if k == "DISPATCH_CONCURRENCY" {
			return "lots"
		}
		return ""
	}
	err := run(t.Context(), []string{"serve"}, getenv, nil, nil)
	if err == nil || !strings.Contains(err.Error(), `DISPATCH_CONCURRENCY="lots"`) {
		t.Errorf("serve = %v, want an error naming DISPATCH_CONCURRENCY", err)
	}
}
