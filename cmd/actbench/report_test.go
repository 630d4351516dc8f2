package main

import "testing"

// TestOrdersCheckCountsTheLargeStagesPipelines: the supplier's orders are
// the whole run's, so row 6 sets them against every end-to-end pipeline's
// operations, the large stage's on both ledgers included.
func TestOrdersCheckCountsTheLargeStagesPipelines(t *testing.T) {
	t.Parallel()
	e2e := func(ops int) e2eResult {
		return e2eResult{MaxOps: 1, Orders: orderCheck{Operations: ops, ExactlyOne: ops, Succeeded: ops}}
	}
	tests := []struct {
		name   string
		orders int
		want   string
	}{
		{"every order has its operation", 22, "PASS"},
		{"one order more", 23, "MISS"},
	}
	for _, tt := range tests {
		r := &results{Plan: tinyPlan, E2E: []e2eResult{e2e(10)},
			Large: &largeResult{EmptyE2E: []e2eResult{e2e(5)}, BigE2E: []e2eResult{e2e(7)}}, TotalOrders: tt.orders}
		var got *line
		for _, l := range lines(r) {
			if l.figure == "orders − operations, run" {
				got = &l
			}
		}
		if got == nil || got.result != tt.want {
			t.Errorf("%s: row %+v, want %s", tt.name, got, tt.want)
		}
	}
}
