package main

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// TestOpsReplayKeepsOnlyTheItemsItIsAskedFor: `actledger ops replay`
// re-reads the review stream and re-runs reconciliation for each item:
// --reason keeps one review reason, --since (a duration back from now or an
// RFC 3339 time) keeps the items announced since then, --dry-run changes
// nothing.
func TestOpsReplayKeepsOnlyTheItemsItIsAskedFor(t *testing.T) {
	t.Parallel()
	in := startServe(t)
	approver, agent, operator := in.token(t, "approver"), in.token(t, "agent"), in.token(t, "operator")
	id := in.refusedIntoReview(t, approver, agent, "po-replay")

	future := time.Now().Add(time.Hour).UTC().Format(time.RFC3339)
	tests := []struct {
		name  string
		args  []string
		items int
	}{
		{"every reason", nil, 1},
		{"its reason", []string{"--reason", "retries_exhausted"}, 1},
		{"another reason", []string{"--reason", "outcome_unknown"}, 0},
		{"since a duration ago", []string{"--since", "1h"}, 1},
		{"since a time to come", []string{"--since", future}, 0},
	}
	for _, tt := range tests {
		out := in.ops(t, operator, append([]string{"replay", "--dry-run"}, tt.args...)...)
		if want := fmt.Sprintf(": %d item(s),", tt.items); !strings.Contains(out, want) {
			t.Errorf("%s: ops replay --dry-run %v:\n%s\nwant %q", tt.name, tt.args, out, want)
		}
		if tt.items > 0 && !strings.Contains(out, "po-replay") {
			t.Errorf("%s: ops replay --dry-run %v does not name the item:\n%s", tt.name, tt.args, out)
		}
	}
	if got := get(t, in.base+"/v1/operations/"+id, operator); got["status"] != "review" {
		t.Errorf("after dry runs the operation is %v, want review", got["status"])
	}
	out := in.ops(t, operator, "replay", "--reason", "retries_exhausted")
	if strings.Contains(out, "dry run") || !strings.Contains(out, ": 1 item(s),") || !strings.Contains(out, "1 changed") {
		t.Errorf("ops replay:\n%s", out)
	}
}
