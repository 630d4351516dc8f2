package testfactory_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/actledger/actledger/auth"
	"github.com/actledger/actledger/broker"
	"github.com/actledger/actledger/internal/testdb"
	"github.com/actledger/actledger/internal/testfactory"
	"github.com/actledger/actledger/ledger"
)

// Each token of a tenant authenticates as its role in that tenant, and a
// second tenant of another name is another tenant.
func TestNewTenantIssuesOneWorkingTokenPerRole(t *testing.T) {
	t.Parallel()
	pool := testdb.New(t)
	tokens, err := auth.New(pool, ledger.New(pool, ledger.Config{}), auth.Config{})
	if err != nil {
		t.Fatal(err)
	}
	acme := testfactory.NewTenant(t, tokens, "Acme Corp.")
	globex := testfactory.NewTenant(t, tokens, "Globex")
	if acme.ID == globex.ID {
		t.Fatalf("two tenants share the id %s", acme.ID)
	}
	for _, tt := range []struct {
		name string
		tok  testfactory.Token
		role auth.Role
	}{
		{"agent", acme.Agent, auth.RoleAgent},
		{"approver", acme.Approver, auth.RoleApprover},
		{"operator", acme.Operator, auth.RoleOperator},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			p, err := tokens.Authenticate(context.Background(), tt.tok.Secret)
			if err != nil {
				t.Fatal(err)
			}
			if p != tt.tok.Principal || p.Role != tt.role || p.Tenant != acme.Name || p.TenantID != acme.ID {
				t.Errorf("the %s token authenticates as %+v, want %+v of tenant %s %s", tt.name, p, tt.tok.Principal, acme.Name, acme.ID)
			}
		})
	}
}

// factory is a ledger on a fresh database with one tenant.
func factory(t *testing.T) (*pgxpool.Pool, *ledger.Store, testfactory.Tenant) {
	t.Helper()
	pool := testdb.New(t)
	store := ledger.New(pool, ledger.Config{Subjects: broker.Subjects{Prefix: "TEST"}})
	tokens, err := auth.New(pool, store, auth.Config{})
	if err != nil {
		t.Fatal(err)
	}
	return pool, store, testfactory.NewTenant(t, tokens, "acme")
}

// Each state Operation offers is reached through the ledger, with the
// key, client key and review asked for, and an operation in review keeps
// the event that put it there.
func TestOperationIsMadeInTheStateAskedFor(t *testing.T) {
	t.Parallel()
	_, store, acme := factory(t)
	review := ledger.Review{Reason: ledger.ReasonRetriesExhausted, Owner: "ops-eu"}
	for _, tt := range []struct {
		opts testfactory.OperationOpts
		want ledger.Status
	}{
		{testfactory.OperationOpts{Key: "po-queued"}, ledger.StatusQueued},
		{testfactory.OperationOpts{Key: "po-proposed", ClientKey: "call-\u202e7", Status: ledger.StatusAwaitingApproval}, ledger.StatusAwaitingApproval},
		{testfactory.OperationOpts{Key: "po-review", Params: `{"sku":"A-1"}`, Status: ledger.StatusReview, Review: review}, ledger.StatusReview},
		{testfactory.OperationOpts{Key: "po-cancelled", Status: ledger.StatusCancelled}, ledger.StatusCancelled},
		{testfactory.OperationOpts{Key: "po-held", Status: ledger.StatusHeld}, ledger.StatusHeld},
		{testfactory.OperationOpts{Key: "po-dispatching", Status: ledger.StatusDispatching}, ledger.StatusDispatching},
		{testfactory.OperationOpts{Key: "po-expired", Status: ledger.StatusDispatching, LeaseUntil: time.Now().Add(-time.Second)}, ledger.StatusDispatching},
		{testfactory.OperationOpts{Key: "po-retry-wait", Status: ledger.StatusRetryWait}, ledger.StatusRetryWait},
		{testfactory.OperationOpts{Key: "po-unknown", Status: ledger.StatusUnknown}, ledger.StatusUnknown},
		{testfactory.OperationOpts{Key: "po-succeeded", Status: ledger.StatusSucceeded}, ledger.StatusSucceeded},
		{testfactory.OperationOpts{Key: "po-failed", Status: ledger.StatusFailed}, ledger.StatusFailed},
	} {
		tt.opts.Tenant = acme
		op := testfactory.Operation(t, store, tt.opts)
		got, err := store.Get(context.Background(), ledger.WholeTenant(acme.ID), op.ID)
		if err != nil {
			t.Fatal(err)
		}
		if got.Status != tt.want || got.Key != tt.opts.Key || got.Version != op.Version || got.Action != testfactory.DefaultAction || got.Provider != testfactory.DefaultProvider {
			t.Errorf("%s: %s %s version %d of %s on %s; want %s, the version returned (%d), %s on %s",
				tt.opts.Key, got.Status, got.Key, got.Version, got.Action, got.Provider, tt.want, op.Version, testfactory.DefaultAction, testfactory.DefaultProvider)
		}
		if got.ClientKey == nil && tt.opts.ClientKey != "" || got.ClientKey != nil && *got.ClientKey != tt.opts.ClientKey {
			t.Errorf("%s: client key %v, want %q", tt.opts.Key, got.ClientKey, tt.opts.ClientKey)
		}
		if tt.want == ledger.StatusReview && (got.ReviewReason == nil || *got.ReviewReason != review.Reason || got.ReviewOwner == nil || *got.ReviewOwner != review.Owner) {
			t.Errorf("%s: review %v by %v, want %s by %s", tt.opts.Key, got.ReviewReason, got.ReviewOwner, review.Reason, review.Owner)
		}
	}
}

// Backdate moves an operation's own times, and only the operations named.
func TestBackdateMovesTheOperationsNamed(t *testing.T) {
	t.Parallel()
	pool, store, acme := factory(t)
	old := testfactory.Operation(t, store, testfactory.OperationOpts{Tenant: acme, Key: "po-old"})
	recent := testfactory.Operation(t, store, testfactory.OperationOpts{Tenant: acme, Key: "po-recent"})
	testfactory.Backdate(t, pool, 100*24*time.Hour, old.ID)
	for _, tt := range []struct {
		op      ledger.Operation
		shifted time.Duration
	}{{old, 100 * 24 * time.Hour}, {recent, 0}} {
		got, err := store.Get(context.Background(), ledger.WholeTenant(acme.ID), tt.op.ID)
		if err != nil {
			t.Fatal(err)
		}
		if d := tt.op.CreatedAt.Sub(got.CreatedAt); d != tt.shifted || tt.op.UpdatedAt.Sub(got.UpdatedAt) != tt.shifted {
			t.Errorf("%s moved %s (created) and %s (updated) into the past, want %s", tt.op.Key, d, tt.op.UpdatedAt.Sub(got.UpdatedAt), tt.shifted)
		}
	}
}
