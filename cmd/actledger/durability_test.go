package main

import (
	"bytes"
	"context"
	"io"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// lockedBuffer is a stderr the logger's goroutines may write concurrently.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// TestServeWarnsAtStartWhenJetStreamIsBelowTheProductionRules: serve says
// on stderr, as it starts, each way the JetStream it talks to falls short
// of file storage, sync_interval always and 3 replicas: one replica always;
// a remote server's sync_interval, which it cannot read, and a remote
// server reached without credentials; never the embedded server's, which
// it starts with sync always itself and which takes no connections.
func TestServeWarnsAtStartWhenJetStreamIsBelowTheProductionRules(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name      string
		embedded  bool
		want, not []string
	}{
		{"remote server", false, []string{"fewer than 3 replicas", "sync_interval", "without credentials"}, []string{"memory storage"}},
		{"embedded server", true, []string{"fewer than 3 replicas"}, []string{"sync_interval", "memory storage", "without credentials"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			in := prepareServe(t, nil)
			getenv := in.getenv
			if tt.embedded {
				dir := filepath.Join(t.TempDir(), "nats")
				getenv = func(k string) string {
					switch k {
					case "NATS_URL":
						return ""
					case "NATS_DATA_DIR":
						return dir
					}
					return in.getenv(k)
				}
			}
			var stderr lockedBuffer
			ctx, cancel := context.WithCancel(t.Context())
			served := make(chan error, 1)
			go func() { served <- run(ctx, []string{"serve"}, getenv, io.Discard, &stderr) }()
			waitReady(t, in.base, served)
			cancel()
			if err := <-served; err != nil {
				t.Fatalf("serve: %v", err)
			}
			log := stderr.String()
			for _, w := range tt.want {
				if !strings.Contains(log, w) {
					t.Errorf("serve's log does not warn %q:\n%s", w, log)
				}
			}
			for _, n := range tt.not {
				if strings.Contains(log, n) {
					t.Errorf("serve's log warns %q, which this setup meets:\n%s", n, log)
				}
			}
		})
	}
}
