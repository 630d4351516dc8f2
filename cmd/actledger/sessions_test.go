package main

import (
	"bytes"
	"context"
	"errors"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/actledger/actledger/auth"
	"github.com/actledger/actledger/internal/testdb"
	"github.com/actledger/actledger/ledger"
)

// TestSessionsEndStopsAPersonsSessionsAndNoOneElses: `actledger sessions
// end --subject S` ends that person's console sessions at once (their
// cookie opens nothing more), leaves another person's and a token's, and
// `--people` ends every person's.
func TestSessionsEndStopsAPersonsSessionsAndNoOneElses(t *testing.T) {
	t.Parallel()
	pool, dbURL := testdb.NewWithURL(t)
	getenv := onlyDatabase(dbURL)
	ctx := context.Background()
	store := ledger.New(pool, ledger.Config{})
	tokens, err := auth.New(pool, store, auth.Config{})
	if err != nil {
		t.Fatal(err)
	}
	tenant, err := store.EnsureTenant(ctx, "acme")
	if err != nil {
		t.Fatal(err)
	}
	person := func(subject string) string {
		t.Helper()
		s, err := tokens.StartPersonSession(ctx, auth.Principal{TenantID: tenant, Tenant: "acme", Role: auth.RoleApprover,
			Person: &auth.Person{Issuer: "https://login.acme.example", Subject: subject, Email: subject + "@acme.example"}}, time.Now().Add(time.Hour))
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	leaver, stayer := person("00u-leaver"), person("00u-stayer")
	created, err := tokens.Create(ctx, "acme", auth.RoleOperator, "ops-"+uuid.NewString()[:8])
	if err != nil {
		t.Fatal(err)
	}
	p, err := tokens.Authenticate(ctx, created.Secret)
	if err != nil {
		t.Fatal(err)
	}
	tokenSession, err := tokens.StartSession(ctx, p, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	live := func(session string) bool {
		_, err := tokens.Session(ctx, session)
		if err != nil && !errors.Is(err, auth.ErrUnauthenticated) {
			t.Fatal(err)
		}
		return err == nil
	}

	var out bytes.Buffer
	if err := run(t.Context(), []string{"sessions", "end", "--subject", "00u-leaver"}, getenv, &out, io.Discard); err != nil {
		t.Fatalf("sessions end: %v", err)
	}
	if !strings.Contains(out.String(), "ended 1 console session(s)") {
		t.Errorf("output %q, want one session ended", out.String())
	}
	if live(leaver) || !live(stayer) || !live(tokenSession) {
		t.Errorf("after ending 00u-leaver's: leaver %v, stayer %v, token %v; want only the leaver's ended", live(leaver), live(stayer), live(tokenSession))
	}
	if err := run(t.Context(), []string{"sessions", "end", "--people"}, getenv, io.Discard, io.Discard); err != nil {
		t.Fatalf("sessions end --people: %v", err)
	}
	if live(stayer) || !live(tokenSession) {
		t.Errorf("after --people: stayer %v, token %v; want every person's ended, the token's kept", live(stayer), live(tokenSession))
	}
	for _, args := range [][]string{{"sessions", "end"}, {"sessions", "end", "--people", "--subject", "x"}, {"sessions"}} {
		if err := run(t.Context(), args, getenv, io.Discard, io.Discard); !errors.Is(err, errUsage) {
			t.Errorf("%q: %v, want a usage error", args, err)
		}
	}
}
