package main

import (
	"bytes"
	"context"
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/actledger/actledger/internal/testdb"
)

// scopedToken runs `actledger token create --tenant demo --role role
// --scope scope` and returns the token it prints.
func (in *instance) scopedToken(t *testing.T, role, scope string) string {
	t.Helper()
	var out bytes.Buffer
	if err := run(t.Context(), []string{"token", "create", "--tenant", "demo", "--role", role, "--scope", scope}, in.getenv, &out, io.Discard); err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(out.String())
}

// TestTokenCreateScopeMustBeAVisibleScope: `token create --scope S` keeps S
// on the token; a --scope that is given but empty, or holds a space or an
// invisible character, is a usage error and creates nothing (it must
// never fall back to a token of the whole tenant).
func TestTokenCreateScopeMustBeAVisibleScope(t *testing.T) {
	t.Parallel()
	pool, dbURL := testdb.NewWithURL(t)
	getenv := onlyDatabase(dbURL)
	create := func(scope string) (string, error) {
		var out bytes.Buffer
		err := run(t.Context(), []string{"token", "create", "--tenant", "acme", "--role", "approver", "--scope", scope}, getenv, &out, io.Discard)
		return out.String(), err
	}
	for _, scope := range []string{"", "supply eu", "supply\u200beu", strings.Repeat("x", 65)} {
		if out, err := create(scope); !errors.Is(err, errUsage) || out != "" {
			t.Errorf("token create --scope %q = %v, printed %q; want a usage error and no token", scope, err, out)
		}
	}
	if out, err := create("supply-eu"); err != nil || !strings.HasPrefix(out, "alt_") {
		t.Fatalf("token create --scope supply-eu = %v, printed %q", err, out)
	}
	var scopes []string
	rows, _ := pool.Query(context.Background(), `SELECT scope FROM api_tokens`)
	for rows.Next() {
		var s string
		if err := rows.Scan(&s); err != nil {
			t.Fatal(err)
		}
		scopes = append(scopes, s)
	}
	if rows.Err() != nil || len(scopes) != 1 || scopes[0] != "supply-eu" {
		t.Errorf("tokens' scopes = %v (%v), want one token of supply-eu", scopes, rows.Err())
	}
}

// TestApprovalsListOfAScopedApproverShowsItsScopesProposalsOnly: tokens
// made with `token create --scope`; `actledger approvals list` with an
// approver of supply-eu shows supply-eu's proposals and none of
// supply-us's, and approving another scope's proposal from the CLI is
// refused as a missing one; an approver of the whole tenant lists both.
func TestApprovalsListOfAScopedApproverShowsItsScopesProposalsOnly(t *testing.T) {
	t.Parallel()
	in := startServe(t)
	euAgent, usAgent := in.scopedToken(t, "agent", "supply-eu"), in.scopedToken(t, "agent", "supply-us")
	euApprover, wholeApprover := in.scopedToken(t, "approver", "supply-eu"), in.token(t, "approver")
	// Over the demo's policy (qty <= 10): a person decides.
	eu := post(t, in.base+"/v1/operations", euAgent, `{"action":"supplier.create_order","key":"po-eu","params":{"sku":"A-1","qty":25},"request_approval":true,"reason":"EU restock"}`)
	us := post(t, in.base+"/v1/operations", usAgent, `{"action":"supplier.create_order","key":"po-us","params":{"sku":"B-2","qty":40},"request_approval":true,"reason":"US restock"}`)
	euID, usID := eu["id"].(string), us["id"].(string)

	list := in.approvals(t, euApprover, "list")
	if !strings.Contains(list, euID) || !strings.Contains(list, "EU restock") {
		t.Errorf("supply-eu's approvals list lacks its proposal:\n%s", list)
	}
	if strings.Contains(list, usID) || strings.Contains(list, "US restock") {
		t.Errorf("supply-eu's approvals list shows supply-us's proposal:\n%s", list)
	}
	var out bytes.Buffer
	err := run(t.Context(), []string{"approvals", "approve", usID, "--fingerprint", us["params_fingerprint"].(string)}, in.clientEnv(euApprover), &out, io.Discard)
	if err == nil || !strings.Contains(err.Error(), "not_found") {
		t.Errorf("supply-eu approves supply-us's proposal: %v, printed %q; want not_found", err, out.String())
	}
	if got := get(t, in.base+"/v1/operations/"+usID, usAgent); got["status"] != "awaiting_approval" {
		t.Errorf("supply-us's proposal is %v, want still awaiting_approval", got["status"])
	}
	if all := in.approvals(t, wholeApprover, "list"); !strings.Contains(all, euID) || !strings.Contains(all, usID) {
		t.Errorf("the whole tenant's approvals list lacks a scope's proposal:\n%s", all)
	}
}
