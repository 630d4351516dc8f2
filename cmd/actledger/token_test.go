package main

import (
	"bytes"
	"context"
	"errors"
	"io"
	"testing"

	"github.com/actledger/actledger/internal/testdb"
)

// TestTokenCreateRefusesATakenName: token names are unique across tenants
// (so that `token revoke NAME` is never ambiguous). Reusing one is a clear
// error, not a database error, and creates nothing: no token, no tenant.
func TestTokenCreateRefusesATakenName(t *testing.T) {
	t.Parallel()
	pool, dbURL := testdb.NewWithURL(t)
	getenv := func(k string) string {
		if k == "DATABASE_URL" {
			return dbURL
		}
		return ""
	}
	create := func(tenant string) (string, error) {
		var out bytes.Buffer
		err := run(t.Context(), []string{"token", "create", "--tenant", tenant, "--role", "agent", "--name", "ci-bot"}, getenv, &out, io.Discard)
		return out.String(), err
	}
	if _, err := create("acme"); err != nil {
		t.Fatalf("first token: %v", err)
	}
	tests := []struct {
		name, tenant string
	}{
		{"in the same tenant", "acme"},
		{"in another tenant", "globex"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			out, err := create(tt.tenant)
			const want = `a token named "ci-bot" already exists; choose another --name`
			if err == nil || err.Error() != want || errors.Is(err, errUsage) {
				t.Errorf("token create = %v, want %q", err, want)
			}
			if out != "" {
				t.Errorf("printed %q, want no token", out)
			}
		})
	}
	t.Cleanup(func() {
		var tokens, tenants int
		err := pool.QueryRow(context.Background(), `SELECT (SELECT count(*) FROM api_tokens), (SELECT count(*) FROM tenants)`).Scan(&tokens, &tenants)
		if err != nil || tokens != 1 || tenants != 1 {
			t.Errorf("tokens %d, tenants %d (%v); want 1 and 1", tokens, tenants, err)
		}
	})
}
