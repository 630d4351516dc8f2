package sso_test

import (
	"context"
	"errors"
	"net/url"
	"testing"

	"github.com/oauth2-proxy/mockoidc"

	"github.com/actledger/actledger/internal/testdb"
	"github.com/actledger/actledger/sso"
)

// TestSignInStartsAreBoundedUntilOneFinishes: a start needs no credential,
// so the sign-ins under way are bounded (Config.MaxPending): past the
// bound a start is refused with ErrTooManyPending and records nothing,
// and the place of one that finishes is free again.
func TestSignInStartsAreBoundedUntilOneFinishes(t *testing.T) {
	t.Parallel()
	m, err := mockoidc.Run()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = m.Shutdown() })
	access, errs := sso.Section{
		OIDC:   &sso.OIDCSection{Issuer: m.Issuer(), ClientID: m.ClientID, ClientSecretEnv: "SECRET"},
		People: []sso.PersonRule{{When: "true", Tenant: "acme", Role: "approver"}},
	}.Compile(env(map[string]string{"SECRET": m.ClientSecret}))
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	pool := testdb.New(t)
	const bound = 3
	s, err := sso.New(sso.Config{Access: access, Pool: pool, ConsoleURL: "http://127.0.0.1:8080/console", MaxPending: bound})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	pending := func() int {
		t.Helper()
		var n int
		if err := pool.QueryRow(ctx, `SELECT count(*) FROM signin_pending`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	var first sso.Started
	for i := range bound {
		started, err := s.Begin(ctx, "/console/approvals")
		if err != nil {
			t.Fatalf("start %d of %d: %v", i+1, bound, err)
		}
		if i == 0 {
			first = started
		}
	}
	if _, err := s.Begin(ctx, "/console/approvals"); !errors.Is(err, sso.ErrTooManyPending) {
		t.Fatalf("start beyond the bound: %v, want ErrTooManyPending", err)
	}
	if n := pending(); n != bound {
		t.Fatalf("%d sign-ins recorded, want %d: the refused start records nothing", n, bound)
	}
	// A callback for the first start, even one that fails at the token
	// endpoint (no code), uses its state up.
	if _, err := s.Finish(ctx, first.Browser, stateOf(t, first.AuthURL), "no-such-code"); err == nil {
		t.Fatal("finish with a made-up code: no error")
	}
	if _, err := s.Begin(ctx, "/console/approvals"); err != nil {
		t.Fatalf("start after one finished: %v, want its place free again", err)
	}
}

// stateOf is the state a start sent the browser to the identity provider
// with.
func stateOf(t *testing.T, authURL string) string {
	t.Helper()
	u, err := url.Parse(authURL)
	if err != nil {
		t.Fatal(err)
	}
	return u.Query().Get("state")
}
