package main

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/actledger/actledger/internal/mocksupplier"
	"github.com/actledger/actledger/internal/testpoll"
)

// TestReconcileCommandPrintsTheFindingsAndExitsOnTheRunsStatus:
// `actledger reconcile` runs the demo provider's statement through the
// API: a complete run exits 0 with one line per finding; an order the
// supplier lost is printed as missing, and --dry-run leaves the
// operation as it was; a run that cannot read its window exits 1 and says
// why; bad arguments are a usage error (exit 2).
func TestReconcileCommandPrintsTheFindingsAndExitsOnTheRunsStatus(t *testing.T) {
	t.Parallel()
	// A skew of a second, so that an order lost a second after its
	// success is judged missing.
	in := startServeWith(t, func(cfg string) string {
		return strings.Replace(cfg, "      lag: 1m\n", "      lag: 1m\n      skew: 1s\n", 1)
	})
	approver, agent, operator := in.token(t, "approver"), in.token(t, "agent"), in.token(t, "operator")
	approval := post(t, in.base+"/v1/approvals", approver, `{"action":"supplier.create_order","params":{"sku":"A-1"},"ttl_seconds":600,"policy_version":"p1"}`)
	op := post(t, in.base+"/v1/operations", agent, `{"action":"supplier.create_order","key":"po-rec","params":{"sku":"A-1"},"approval_id":"`+approval["id"].(string)+`"}`)
	id := op["id"].(string)
	done := in.waitStatus(t, agent, id, "succeeded")

	out := in.command(t, "reconcile", operator, "acme", "--since", "1h", "--until", "0s")
	if !strings.Contains(out, "acme: complete") || !strings.Contains(out, "matched      1") {
		t.Fatalf("reconcile acme:\n%s", out)
	}
	if err := in.supplier.RemoveOrder(done["provider_reference"].(string)); err != nil {
		t.Fatal(err)
	}
	// The success is judged once it is a skew old.
	testpoll.Until(t, 10*time.Second, func() error {
		out = in.command(t, "reconcile", operator, "acme", "--since", "1h", "--until", "0s", "--dry-run")
		if !strings.Contains(out, "dry run") || !strings.Contains(out, "missing      1") || !strings.Contains(out, "missing operation "+id) {
			return fmt.Errorf("reconcile acme --dry-run:\n%s", out)
		}
		return nil
	})
	if got := get(t, in.base+"/v1/operations/"+id, operator); got["status"] != "succeeded" {
		t.Fatalf("after a dry run the operation is %v", got["status"])
	}

	in.supplier.SetStatementFaults(mocksupplier.StatementFault{Kind: mocksupplier.PageError500})
	var buf bytes.Buffer
	err := run(t.Context(), []string{"reconcile", "acme", "--since", "1h", "--until", "0s"}, in.clientEnv(operator), &buf, io.Discard)
	if !errors.Is(err, errRunNotComplete) || exitStatus(err, io.Discard) != 1 || !strings.Contains(buf.String(), "acme: failed") {
		t.Fatalf("a failed run: err %v, output:\n%s", err, buf.String())
	}
	if !strings.Contains(buf.String(), "missing      0 (not judged") {
		t.Fatalf("a failed run must say missing was not judged:\n%s", buf.String())
	}
	for _, args := range [][]string{{"reconcile"}, {"reconcile", "acme", "--since", "yesterday"}, {"reconcile", "acme", "--since", "-1h"}} {
		err := run(t.Context(), args, in.clientEnv(operator), io.Discard, io.Discard)
		if exitStatus(err, io.Discard) != 2 {
			t.Errorf("%v: %v, want a usage error", args, err)
		}
	}
}
