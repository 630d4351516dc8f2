package auth_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/actledger/actledger/auth"
	"github.com/actledger/actledger/broker"
	"github.com/actledger/actledger/internal/testdb"
	"github.com/actledger/actledger/internal/testfactory"
	"github.com/actledger/actledger/internal/testpoll"
	"github.com/actledger/actledger/ledger"
)

// TestASessionEndsAtItsExpiryAtSignOutAndWithItsToken: a console session
// authenticates its token's principal until it expires, until it is ended,
// or until the token is revoked, whichever comes first; only its hash is
// stored, and a token is never taken for a session (nor a session for a
// token).
func TestASessionEndsAtItsExpiryAtSignOutAndWithItsToken(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := testdb.New(t)
	tokens, err := auth.New(pool, ledger.New(pool, ledger.Config{Subjects: broker.Subjects{Prefix: "TEST"}}), auth.Config{})
	if err != nil {
		t.Fatal(err)
	}
	acme := testfactory.NewTenant(t, tokens, "acme")
	approver := acme.Approver.Principal

	short, err := tokens.StartSession(ctx, approver, 200*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	if p, err := tokens.Session(ctx, short); err != nil || p.TokenID != approver.TokenID || p.Role != auth.RoleApprover {
		t.Fatalf("a new session = %+v, %v; want the approver", p, err)
	}
	var stored int
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM console_sessions WHERE id_hash = sha256($1::bytea)`, []byte(short)).Scan(&stored); err != nil || stored != 1 {
		t.Fatalf("sessions stored under the id's SHA-256: %d, %v; want 1", stored, err)
	}
	testpoll.Until(t, 10*time.Second, func() error {
		if _, err := tokens.Session(ctx, short); !errors.Is(err, auth.ErrUnauthenticated) {
			return fmt.Errorf("a session past its lifetime still authenticates: %v", err)
		}
		return nil
	})

	ended, err := tokens.StartSession(ctx, approver, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	// Signing in deleted the expired session.
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM console_sessions`).Scan(&stored); err != nil || stored != 1 {
		t.Errorf("sessions after a sign-in: %d, %v; want only the live one", stored, err)
	}
	if err := tokens.EndSession(ctx, ended); err != nil {
		t.Fatal(err)
	}
	if _, err := tokens.Session(ctx, ended); !errors.Is(err, auth.ErrUnauthenticated) {
		t.Errorf("an ended session = %v, want ErrUnauthenticated", err)
	}

	live, err := tokens.StartSession(ctx, approver, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tokens.Session(ctx, acme.Approver.Secret); !errors.Is(err, auth.ErrUnauthenticated) {
		t.Errorf("a token taken for a session: %v, want ErrUnauthenticated", err)
	}
	if _, err := tokens.Authenticate(ctx, live); !errors.Is(err, auth.ErrUnauthenticated) {
		t.Errorf("a session taken for a token: %v, want ErrUnauthenticated", err)
	}
	if _, err := tokens.Revoke(ctx, approver.Name, "test"); err != nil {
		t.Fatal(err)
	}
	if _, err := tokens.Session(ctx, live); !errors.Is(err, auth.ErrUnauthenticated) {
		t.Errorf("a session of a revoked token = %v, want ErrUnauthenticated", err)
	}
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM console_sessions`).Scan(&stored); err != nil || stored != 0 {
		t.Errorf("sessions after the token's revocation: %d, %v; want 0", stored, err)
	}
}
