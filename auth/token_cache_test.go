package auth_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/actledger/actledger/auth"
	"github.com/actledger/actledger/internal/testdb"
	"github.com/actledger/actledger/internal/testpipeline"
	"github.com/actledger/actledger/internal/testpoll"
	"github.com/actledger/actledger/ledger"
)

// hideHash makes a token's row unfindable by its secret, behind the
// cache's back: from then on only a cached principal authenticates it.
const hideHash = `UPDATE api_tokens SET token_hash = sha256(token_hash) WHERE id = $1`

// listening starts tokens' revocation listener, stops it when the test
// ends, and waits until it is connected: the cache serves only then.
func listening(t *testing.T, tokens *auth.Tokens) {
	t.Helper()
	if err := tokens.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(tokens.Stop)
	waitListening(t, tokens)
}

// waitListening waits until tokens' revocation listener (started with the
// pipeline's other services) is connected.
func waitListening(t *testing.T, tokens *auth.Tokens) {
	t.Helper()
	testpoll.Until(t, 5*time.Second, func() error {
		if !tokens.Listening() {
			return errors.New("the token revocation listener did not connect")
		}
		return nil
	})
}

// Only an agent's lookup is kept, and only for the TTL: with the token's
// row unfindable, the agent still authenticates within the TTL (no query
// was made) and not after it; an approver's and an operator's token, or
// an agent's with the cache off, are refused on the very next call.
func TestOnlyAgentLookupsAreServedFromTheCacheAndOnlyForTheTTL(t *testing.T) {
	t.Parallel()
	tests := []struct {
		role   auth.Role
		cfg    auth.Config
		cached bool
	}{
		{auth.RoleAgent, auth.Config{}, true},
		{auth.RoleApprover, auth.Config{}, false},
		{auth.RoleOperator, auth.Config{}, false},
		{auth.RoleAgent, auth.Config{CacheTTL: auth.NoCache}, false},
		// Any negative TTL is no cache, never the default.
		{auth.RoleAgent, auth.Config{CacheTTL: -time.Hour}, false},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("%s ttl %s", tt.role, tt.cfg.CacheTTL), func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			pool := testdb.New(t)
			tokens, err := auth.New(pool, ledger.New(pool, ledger.Config{}), tt.cfg)
			if err != nil {
				t.Fatal(err)
			}
			if tt.cfg.CacheTTL >= 0 {
				listening(t, tokens)
			}
			c, err := tokens.Create(ctx, "acme", tt.role, "")
			if err != nil {
				t.Fatal(err)
			}
			cachedAt := time.Now()
			if _, err := tokens.Authenticate(ctx, c.Secret); err != nil {
				t.Fatal(err)
			}
			if _, err := pool.Exec(ctx, hideHash, c.ID); err != nil {
				t.Fatal(err)
			}
			p, err := tokens.Authenticate(ctx, c.Secret)
			if !tt.cached {
				if !errors.Is(err, auth.ErrUnauthenticated) {
					t.Fatalf("next call after the row was hidden: %+v, %v; want ErrUnauthenticated", p, err)
				}
				return
			}
			if err != nil || p.TokenID != c.ID || p.Role != tt.role {
				t.Fatalf("next call within the TTL: %+v, %v; want the cached principal", p, err)
			}
			testpoll.Until(t, time.Until(cachedAt.Add(auth.DefaultCacheTTL+500*time.Millisecond)), func() error {
				_, err := tokens.Authenticate(ctx, c.Secret)
				switch {
				case errors.Is(err, auth.ErrUnauthenticated):
					return nil
				case err != nil:
					t.Fatal(err)
				}
				return fmt.Errorf("still authenticated %s after it was cached, TTL %s", time.Since(cachedAt), auth.DefaultCacheTTL)
			})
		})
	}
}

// A refused token is looked up again on its next call: a token found
// revoked, then restored behind the cache's back, authenticates at once.
func TestAFailedLookupIsNeverCached(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := testdb.New(t)
	store := ledger.New(pool, ledger.Config{})
	tokens, err := auth.New(pool, store, auth.Config{CacheTTL: auth.MaxCacheTTL})
	if err != nil {
		t.Fatal(err)
	}
	listening(t, tokens)
	c, err := tokens.Create(ctx, "acme", auth.RoleAgent, "")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tokens.Revoke(ctx, c.Name, "test"); err != nil {
		t.Fatal(err)
	}
	if _, err := tokens.Authenticate(ctx, c.Secret); !errors.Is(err, auth.ErrUnauthenticated) {
		t.Fatalf("revoked token: %v, want ErrUnauthenticated", err)
	}
	if _, err := pool.Exec(ctx, `UPDATE api_tokens SET revoked_at = NULL WHERE id = $1`, c.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := tokens.Authenticate(ctx, c.Secret); err != nil {
		t.Errorf("restored token: %v, want it authenticated", err)
	}
}

// cachedAgent is a running pipeline whose API has just served its agent's
// token, now in its cache for a minute, and that agent.
func cachedAgent(t *testing.T) (*testpipeline.Pipeline, auth.Principal) {
	t.Helper()
	p := testpipeline.New(t, testpipeline.Options{TokenCacheTTL: auth.MaxCacheTTL})
	p.Start(0)
	waitListening(t, p.Tokens)
	if status, out := p.Do("GET", "/v1/actions", p.Agent, ""); status != http.StatusOK {
		t.Fatalf("before revoking: %d %v", status, out)
	}
	agent, err := p.Tokens.Authenticate(context.Background(), p.Agent)
	if err != nil {
		t.Fatal(err)
	}
	return p, agent
}

// Revoke evicts the token from its own process's cache: the very next
// request is refused although the TTL is far from over.
func TestRevokingInTheSameProcessRefusesTheVeryNextRequest(t *testing.T) {
	t.Parallel()
	p, agent := cachedAgent(t)
	if _, err := p.Tokens.Revoke(context.Background(), agent.Name, "test"); err != nil {
		t.Fatal(err)
	}
	if status, out := p.Do("GET", "/v1/actions", p.Agent, ""); status != http.StatusUnauthorized {
		t.Errorf("the request after revoking: %d %v, want 401", status, out)
	}
}

// An approver's or an operator's token revoked by another process (the
// CLI) is refused by the API on its very next request: people's tokens are
// never cached, whatever the TTL.
func TestAPersonsTokenRevokedElsewhereIsRefusedOnItsVeryNextRequest(t *testing.T) {
	t.Parallel()
	tests := []struct {
		role auth.Role
		path string
	}{
		{auth.RoleApprover, "/v1/approval-requests"},
		{auth.RoleOperator, "/v1/dispatch"},
	}
	for _, tt := range tests {
		t.Run(string(tt.role), func(t *testing.T) {
			t.Parallel()
			p := testpipeline.New(t, testpipeline.Options{TokenCacheTTL: auth.MaxCacheTTL})
			p.Start(0)
			waitListening(t, p.Tokens)
			secret := map[auth.Role]string{auth.RoleApprover: p.Approver, auth.RoleOperator: p.Operator}[tt.role]
			if status, out := p.Do("GET", tt.path, secret, ""); status != http.StatusOK {
				t.Fatalf("before revoking: %d %v", status, out)
			}
			person, err := p.Tokens.Authenticate(context.Background(), secret)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := p.CLITokens().Revoke(context.Background(), person.Name, "cli:token-revoke"); err != nil {
				t.Fatal(err)
			}
			if status, out := p.Do("GET", tt.path, secret, ""); status != http.StatusUnauthorized {
				t.Errorf("the request after revoking elsewhere: %d %v, want 401", status, out)
			}
		})
	}
}

// An agent token revoked by another process (the CLI) is refused by the
// API as soon as the revocation commits: Revoke announces it, and the
// API's listener evicts it, long before the cache's TTL (a minute here).
func TestAnAgentTokenRevokedElsewhereIsRefusedAtOnce(t *testing.T) {
	t.Parallel()
	p, agent := cachedAgent(t)
	if _, err := p.CLITokens().Revoke(context.Background(), agent.Name, "cli:token-revoke"); err != nil {
		t.Fatal(err)
	}
	if status, out := p.Do("GET", "/v1/actions", p.Agent, ""); status != http.StatusUnauthorized {
		t.Fatalf("the first request once the revocation returned: %d %v, want 401", status, out)
	}
}

// Should a revocation's announcement never reach the API (here the token
// is revoked behind its back, by a plain UPDATE), an agent token is served
// from the cache until the TTL ends, and no longer. What it asks for in
// between, an operation and a proposal a person then approves, goes
// through the real path (HTTP, Postgres, JetStream, a dispatcher) and is
// held there before any call: the dispatcher's claim finds the requesting
// token revoked (token_revoked), and the supplier sees no request for it.
func TestAnAgentTokenServedAfterARevocationItMissedHasItsWorkHeld(t *testing.T) {
	t.Parallel()
	const ttl = 2 * time.Second
	ctx := context.Background()
	p := testpipeline.New(t, testpipeline.Options{TokenCacheTTL: ttl})
	p.Start(1)
	waitListening(t, p.Tokens)
	cli := p.CLITokens()
	revoked, err := cli.Create(ctx, p.Tenant, auth.RoleAgent, "revoked-agent")
	if err != nil {
		t.Fatal(err)
	}
	approval := p.Approve(`{"sku":"A-1"}`, time.Hour)

	cachedAt := time.Now()
	if status, out := p.Do("GET", "/v1/actions", revoked.Secret, ""); status != http.StatusOK {
		t.Fatalf("before revoking: %d %v", status, out)
	}
	if _, err := p.Pool.Exec(ctx, `UPDATE api_tokens SET revoked_at = now() WHERE id = $1`, revoked.ID); err != nil {
		t.Fatal(err)
	}
	status, out := p.Do("POST", "/v1/operations", revoked.Secret,
		fmt.Sprintf(`{"action":%q,"key":"po-after-revoke","params":{"sku":"A-1"},"approval_id":%q}`, testpipeline.Action, approval.ID))
	if status != http.StatusCreated {
		t.Fatalf("enqueue within the TTL after the missed revocation: %d %v, want 201 from the cache", status, out)
	}
	op := p.Operation(out)
	status, out = p.Do("POST", "/v1/operations", revoked.Secret,
		fmt.Sprintf(`{"action":%q,"key":"proposed-after-revoke","params":{"sku":"C-1"},"request_approval":true,"reason":"restock"}`, testpipeline.Action))
	if status != http.StatusAccepted {
		t.Fatalf("propose within the TTL after the missed revocation: %d %v, want 202 from the cache", status, out)
	}
	proposal := p.Operation(out)

	p.Eventually(ttl+time.Second, "the revoked token refused", func() bool {
		status, _ := p.Do("GET", "/v1/actions", revoked.Secret, "")
		return status == http.StatusUnauthorized
	})
	if since := time.Since(cachedAt); since > ttl+time.Second {
		t.Errorf("refused %s after it was cached, TTL %s", since, ttl)
	}

	// The proposal waits like any other; a person approves it.
	status, out = p.Do("POST", "/v1/operations/"+proposal.ID.String()+"/approve", p.Approver,
		fmt.Sprintf(`{"params_fingerprint":%q}`, proposal.ParamsFingerprint))
	if status != http.StatusOK {
		t.Fatalf("approve the proposal: %d %v", status, out)
	}
	// A control operation of a valid agent goes out: the pipeline sends.
	control := p.Enqueue("po-control", `{"sku":"B-1"}`)
	p.WaitStatus(control, ledger.StatusSucceeded, 20*time.Second)
	for _, o := range []ledger.Operation{op, proposal} {
		p.WaitStatus(o, ledger.StatusHeld, 20*time.Second)
		if kinds := p.Kinds(o); !slices.Contains(kinds, string(ledger.LapseTokenRevoked)) {
			t.Errorf("%s: events %v, want a %s hold; history:\n%s", o.Key, kinds, ledger.LapseTokenRevoked, p.History(o))
		}
		if creates, lookups := p.Creates(o), len(p.Supplier.LookupRequests(o.ExternalKey)); creates != 0 || lookups != 0 {
			t.Errorf("%s: supplier requests %d creates, %d lookups; want none", o.Key, creates, lookups)
		}
		if n := p.Orders(o); n != 0 {
			t.Errorf("%s: %d orders, want none", o.Key, n)
		}
	}
	if total := p.Supplier.TotalOrders(); total != 1 {
		t.Errorf("orders in all %d, want 1 (the control)", total)
	}
}

// The cache serves only while revocations can reach it: once the listener
// stops (as when its connection is lost), the very next call is checked in
// the database again.
func TestTheCacheServesNothingWhileNotListening(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := testdb.New(t)
	tokens, err := auth.New(pool, ledger.New(pool, ledger.Config{}), auth.Config{CacheTTL: auth.MaxCacheTTL})
	if err != nil {
		t.Fatal(err)
	}
	listening(t, tokens)
	c, err := tokens.Create(ctx, "acme", auth.RoleAgent, "")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tokens.Authenticate(ctx, c.Secret); err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, hideHash, c.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := tokens.Authenticate(ctx, c.Secret); err != nil {
		t.Fatalf("while listening: %v, want the cached principal", err)
	}
	tokens.Stop()
	if _, err := tokens.Authenticate(ctx, c.Secret); !errors.Is(err, auth.ErrUnauthenticated) {
		t.Errorf("after the listener stopped: %v, want ErrUnauthenticated (checked in the database)", err)
	}
}
