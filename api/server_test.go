package api_test

import (
	"strings"
	"testing"
	"time"

	"github.com/actledger/actledger/api"
	"github.com/actledger/actledger/auth"
	"github.com/actledger/actledger/ledger"
	"github.com/actledger/actledger/provider"
)

// A wiring mistake is an error naming the field, which the caller can
// report, not a panic.
func TestNewNamesTheMissingOrUnusableField(t *testing.T) {
	t.Parallel()
	store := ledger.New(nil, ledger.Config{})
	tokens, err := auth.New(nil, store, auth.Config{})
	if err != nil {
		t.Fatal(err)
	}
	reg, err := provider.Parse([]byte("providers: {}\nactions: {}\n"))
	if err != nil {
		t.Fatal(err)
	}
	complete := func() api.Config {
		return api.Config{
			Ledger: store, Tokens: tokens,
			Registry: reg,
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
		{"no registry", func(c *api.Config) { c.Registry = nil }, "Config.Registry"},
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

// The OpenAPI document is served without a token, and (as every answer of
// these tests) checked against itself on the way.
func TestOpenAPIDocumentIsServedWithoutAToken(t *testing.T) {
	t.Parallel()
	f := setup(t)
	r := f.do(t, "GET", "/openapi.json", "", nil)
	if r.status != 200 || r.body["openapi"] != "3.1.0" {
		t.Fatalf("GET /openapi.json: %d %.200s", r.status, r.raw)
	}
	paths, _ := r.body["paths"].(map[string]any)
	for _, p := range []string{"/v1/operations", "/v1/operations/{id}", "/v1/webhooks/{provider}", "/openapi.json"} {
		if paths[p] == nil {
			t.Errorf("the served document has no path %s", p)
		}
	}
}
