package ledger

import (
	"context"
	"testing"
	"time"

	"github.com/google/uuid"
)

// TestWideStatementsTakeExactlyTheirNamedArguments runs pgx's own strict
// rewrite of the widest statements with the arguments their callers build:
// a placeholder without an argument, or an argument no placeholder uses,
// fails here rather than on the first write of that kind.
func TestWideStatementsTakeExactlyTheirNamedArguments(t *testing.T) {
	t.Parallel()
	s := New(nil, Config{})
	claim := Change{
		ID: uuid.New(), From: StatusQueued, Version: 1, To: StatusDispatching, Kind: "claimed", Actor: "worker:w",
		LeaseOwner: "w", LeaseFor: time.Minute,
	}
	review := Change{
		ID: uuid.New(), From: StatusUnknown, Version: 3, To: StatusReview, Kind: "review", Actor: "system",
		Review: &Review{Reason: ReasonUnmatchedEvidence, Owner: "ops", Deadline: time.Now()},
	}
	for name, c := range map[string]Change{"claim": claim, "review": review} {
		args, err := s.transitionArgs(c)
		if err != nil {
			t.Fatal(err)
		}
		if _, got, err := args.RewriteQuery(context.Background(), nil, operationTransition, nil); err != nil || len(got) != len(args) {
			t.Errorf("operationTransition (%s): %d positional arguments from %d named, err %v", name, len(got), len(args), err)
		}
	}
	call, err := s.newEnqueueCall(EnqueueRequest{TenantID: uuid.New(), Action: "a", Provider: "p", Params: []byte(`{}`), ApprovalID: uuid.New()}, "subject")
	if err != nil {
		t.Fatal(err)
	}
	args := call.args()
	if _, got, err := args.RewriteQuery(context.Background(), nil, operationEnqueue, nil); err != nil || len(got) != len(args) {
		t.Errorf("operationEnqueue: %d positional arguments from %d named, err %v", len(got), len(args), err)
	}
}
