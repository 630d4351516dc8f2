package main

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/actledger/actledger/internal/testdb"
)

// TestTokenCreateRefusesATakenName: token names are unique across tenants
// (so that `token revoke NAME` is never ambiguous). Reusing one is a clear
// error, not a database error, and creates nothing: no token, no tenant.
func TestTokenCreateRefusesATakenName(t *testing.T) {
	t.Parallel()
	pool, dbURL := testdb.NewWithURL(t)
	getenv := onlyDatabase(dbURL)
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

// TestTokenRevokeEndsTheTokenAndHoldsItsUnsentWork: `actledger token
// revoke NAME` against a running service: the token authenticates nothing
// once the service hears of the revocation (it had the token cached), and
// its proposal that was never executed is held.
func TestTokenRevokeEndsTheTokenAndHoldsItsUnsentWork(t *testing.T) {
	t.Parallel()
	in := startServe(t)
	var out bytes.Buffer
	if err := run(t.Context(), []string{"token", "create", "--tenant", "demo", "--role", "agent", "--name", "bot-revoked"}, in.getenv, &out, io.Discard); err != nil {
		t.Fatal(err)
	}
	agent := strings.TrimSpace(out.String())
	operator := in.token(t, "operator")
	// 50 is over the demo policy's limit: the proposal waits for a person.
	op := post(t, in.base+"/v1/operations", agent, `{"action":"supplier.create_order","key":"po-rev-1","params":{"sku":"A-1","qty":50},"request_approval":true}`)
	if op["status"] != "awaiting_approval" {
		t.Fatalf("proposal = %v, want awaiting_approval", op)
	}
	id := op["id"].(string)
	get(t, in.base+"/v1/operations/"+id, agent) // the service now knows the token

	out.Reset()
	if err := run(t.Context(), []string{"token", "revoke", "bot-revoked"}, in.getenv, &out, io.Discard); err != nil {
		t.Fatal(err)
	}
	if got, want := out.String(), "revoked bot-revoked; 1 unsent operation(s) held\n"; got != want {
		t.Errorf("token revoke printed %q, want %q", got, want)
	}
	// From then on it authenticates nothing: the service evicted the
	// cached token (LISTEN/NOTIFY) before the command returned.
	req, _ := http.NewRequest("GET", in.base+"/v1/operations/"+id, nil)
	req.Header.Set("Authorization", "Bearer "+agent)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusUnauthorized {
		t.Fatalf("the first request after token revoke returned: %d, want 401", res.StatusCode)
	}
	if got := get(t, in.base+"/v1/operations/"+id, operator); got["status"] != "held" {
		t.Errorf("the revoked token's proposal is %v, want held", got["status"])
	}
}

// TestTokenRevokeByIDRevokesOnlyThatToken: `token revoke NAME|ID` takes a
// name or an id, so no token may be named after another's id: revoking by
// that id would end both tokens.
func TestTokenRevokeByIDRevokesOnlyThatToken(t *testing.T) {
	t.Parallel()
	pool, dbURL := testdb.NewWithURL(t)
	getenv := onlyDatabase(dbURL)
	if err := run(t.Context(), []string{"token", "create", "--tenant", "acme", "--role", "agent", "--name", "first"}, getenv, io.Discard, io.Discard); err != nil {
		t.Fatal(err)
	}
	var id string
	if err := pool.QueryRow(context.Background(), `SELECT id::text FROM api_tokens WHERE name = 'first'`).Scan(&id); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	err := run(t.Context(), []string{"token", "create", "--tenant", "acme", "--role", "agent", "--name", id}, getenv, &out, io.Discard)
	if err == nil || out.Len() != 0 {
		t.Errorf("token create --name <another token's id> = %v, printed %q; want a refusal and no token", err, out.String())
	}
	if err := run(t.Context(), []string{"token", "revoke", id}, getenv, io.Discard, io.Discard); err != nil {
		t.Fatal(err)
	}
	var revoked, live int
	if err := pool.QueryRow(context.Background(),
		`SELECT count(*) FILTER (WHERE revoked_at IS NOT NULL), count(*) FILTER (WHERE revoked_at IS NULL) FROM api_tokens`).Scan(&revoked, &live); err != nil {
		t.Fatal(err)
	}
	if revoked != 1 || live != 0 {
		t.Errorf("after token revoke %s: %d revoked, %d live; want only that one token, revoked", id, revoked, live)
	}
}
