package main

import (
	"context"
	"fmt"
	"io"
	"testing"
	"time"
)

// TestRolesInSeparateProcessesCarryAnOperationThrough: `serve --roles api`
// and `serve --roles relay,dispatcher,reconciler`, two runs sharing only
// Postgres and NATS, together take an approved operation from the API to
// exactly one order at the supplier.
func TestRolesInSeparateProcessesCarryAnOperationThrough(t *testing.T) {
	t.Parallel()
	in := prepareServe(t, nil)
	start := func(roles string, ready func(served <-chan error)) {
		ctx, cancel := context.WithCancel(t.Context())
		served := make(chan error, 1)
		go func() { served <- run(ctx, []string{"serve", "--roles", roles}, in.getenv, io.Discard, io.Discard) }()
		ready(served)
		t.Cleanup(func() {
			cancel()
			select {
			case err := <-served:
				if err != nil {
					t.Errorf("serve --roles %s returned %v, want nil", roles, err)
				}
			case <-time.After(30 * time.Second):
				t.Errorf("serve --roles %s did not shut down", roles)
			}
		})
	}
	start("api", func(served <-chan error) { waitReady(t, in.base, served) })
	// No listener to wait for: the operation's progress shows it runs (an
	// early failure is reported when the test ends).
	start("relay,dispatcher,reconciler", func(<-chan error) {})
	approver, agent := in.token(t, "approver"), in.token(t, "agent")
	approval := post(t, in.base+"/v1/approvals", approver, `{"action":"supplier.create_order","params":{"sku":"A-1"},"ttl_seconds":600,"policy_version":"p1"}`)
	op := post(t, in.base+"/v1/operations", agent, fmt.Sprintf(`{"action":"supplier.create_order","key":"po-split","params":{"sku":"A-1"},"approval_id":%q}`, approval["id"]))
	done := in.waitStatus(t, agent, op["id"].(string), "succeeded")
	if n := in.supplier.Orders(done["external_key"].(string)); n != 1 {
		t.Errorf("supplier has %d orders, want exactly 1", n)
	}
}
