package main

import (
	"context"
	"fmt"
	"io"
	"net/url"
	"strings"
	"testing"

	"github.com/actledger/actledger/client"
)

// TestServeOnAMultiHostDatabaseURLWorksAndWarnsOnceWithoutASynchronousStandby:
// DATABASE_URL may list the hosts of a cluster with
// target_session_attrs=read-write (pgx tries them in turn and keeps the
// writable one), and serve runs on it: an operation reaches the supplier.
// The local Postgres has no synchronous standby, so serve says so once, at
// WARN, naming the settings it read and what that risks.
func TestServeOnAMultiHostDatabaseURLWorksAndWarnsOnceWithoutASynchronousStandby(t *testing.T) {
	t.Parallel()
	in := prepareServe(t, nil)
	u, err := url.Parse(in.getenv("DATABASE_URL"))
	if err != nil {
		t.Fatal(err)
	}
	q := u.Query()
	q.Set("target_session_attrs", "read-write")
	u.RawQuery = q.Encode()
	multiHost := strings.Replace(u.String(), "@"+u.Host+"/", "@"+u.Host+","+u.Host+"/", 1)
	if !strings.Contains(multiHost, ","+u.Host+"/") {
		t.Fatalf("no second host in %s", multiHost)
	}
	getenv := in.getenv
	in.getenv = func(k string) string {
		if k == "DATABASE_URL" {
			return multiHost
		}
		return getenv(k)
	}
	var stderr lockedBuffer
	ctx, cancel := context.WithCancel(t.Context())
	served := make(chan error, 1)
	go func() { served <- run(ctx, []string{"serve"}, in.getenv, io.Discard, &stderr) }()
	waitReady(t, in.base, served)

	approver, agent := in.token(t, "approver"), in.token(t, "agent")
	approval := post(t, in.base+"/v1/approvals", approver, `{"action":"supplier.create_order","params":{"sku":"A-1"},"ttl_seconds":600,"policy_version":"p1"}`)
	op := post(t, in.base+"/v1/operations", agent, fmt.Sprintf(`{"action":"supplier.create_order","key":"po-multi","params":{"sku":"A-1"},"approval_id":%q}`, approval["id"]))
	done := in.waitStatus(t, agent, op["id"].(string), "succeeded")
	if got := in.supplier.Orders(done["external_key"].(string)); got != 1 {
		t.Errorf("supplier orders = %d, want 1", got)
	}
	cancel()
	if err := <-served; err != nil {
		t.Fatalf("serve: %v", err)
	}

	var warnings []string
	for line := range strings.SplitSeq(stderr.String(), "\n") {
		if strings.Contains(line, "no synchronous standby") {
			warnings = append(warnings, line)
		}
	}
	if len(warnings) != 1 || !strings.Contains(warnings[0], "level=WARN") || !strings.Contains(warnings[0], "synchronous_standby_names=") ||
		!strings.Contains(warnings[0], "can lose") {
		t.Fatalf("warnings %q, want one WARN naming synchronous_standby_names and what it risks", warnings)
	}
}

// TestOnlyAStandbyNamedAndWaitedForIsSynchronous: a commit is on a
// standby only when one is named and synchronous_commit waits for it.
func TestOnlyAStandbyNamedAndWaitedForIsSynchronous(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		names, commit string
		want          bool
	}{
		{"", "on", false},
		{"  ", "on", false},
		{"FIRST 1 (s1, s2)", "on", true},
		{"ANY 1 (s1, s2)", "remote_apply", true},
		{"s1", "remote_write", true},
		{"s1", "local", false},
		{"s1", "off", false},
	} {
		if got := (replication{StandbyNames: tc.names, Commit: tc.commit}).synchronous(); got != tc.want {
			t.Errorf("synchronous_standby_names=%q synchronous_commit=%q: synchronous %v, want %v", tc.names, tc.commit, got, tc.want)
		}
	}
}

// TestOpsDispatchSaysWhyTheLedgerPausedDispatch: `ops dispatch` prints a
// ledger_behind pause with its reason and the message that proved it.
func TestOpsDispatchSaysWhyTheLedgerPausedDispatch(t *testing.T) {
	t.Parallel()
	var out strings.Builder
	err := printDispatch(&out, &client.DispatchStatus{Paused: []client.Pause{{PausedBy: "actledger", PausedAt: "2026-12-02T16:00:00Z",
		Reason: "ledger_behind", Detail: "a dispatch message names operation x (version 3), which the ledger does not hold"}}})
	if err != nil {
		t.Fatal(err)
	}
	if got := out.String(); !strings.Contains(got, "PAUSED provider=* action=* by actledger") ||
		!strings.Contains(got, "reason=ledger_behind: a dispatch message names operation x") {
		t.Errorf("ops dispatch printed\n%s", got)
	}
}
