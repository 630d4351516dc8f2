package api_test

import (
	"strings"
	"testing"
	"time"

	"github.com/actledger/actledger/api"
	"github.com/actledger/actledger/auth"
	"github.com/actledger/actledger/ledger"
)

// A wiring mistake is an error naming the field, which the caller can
// report, not a panic.
func TestNewNamesTheMissingOrUnusableField(t *testing.T) {
	t.Parallel()
	store := ledger.New(nil, ledger.Config{})
	complete := func() api.Config {
		return api.Config{
			Ledger: store, Tokens: auth.New(nil, store),
			DispatchSubject: func(p string) string { return "TEST.dispatch." + p },
			Targets:         map[string]ledger.Target{},
		}
	}
	tests := []struct {
		name   string
		change func(*api.Config)
		want   string // in the error; "" for none
	}{
		{"complete", func(*api.Config) {}, ""},
		{"no ledger", func(c *api.Config) { c.Ledger = nil }, "Config.Ledger"},
		{"no tokens", func(c *api.Config) { c.Tokens = nil }, "Config.Tokens"},
		{"no dispatch subject", func(c *api.Config) { c.DispatchSubject = nil }, "Config.DispatchSubject"},
		{"no targets", func(c *api.Config) { c.Targets = nil }, "Config.Targets"},
		{"negative body limit", func(c *api.Config) { c.MaxBody = -1 }, "Config.MaxBody"},
		{"negative request timeout", func(c *api.Config) { c.RequestTimeout = -time.Second }, "Config.RequestTimeout"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			cfg := complete()
			tt.change(&cfg)
			s, err := api.New(cfg)
			switch {
			case tt.want == "" && (err != nil || s == nil):
				t.Fatalf("New: %v, want a server", err)
			case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
				t.Fatalf("New: %v, want an error naming %s", err, tt.want)
			}
		})
	}
}
