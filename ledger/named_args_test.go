package ledger

import (
	"context"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/actledger/actledger/broker"
)

// TestWideStatementsTakeExactlyTheirNamedArguments builds the arguments
// of the widest statements as their callers do: a placeholder without an
// argument, or an argument no placeholder uses, fails here rather than on
// the first write of that kind.
func TestWideStatementsTakeExactlyTheirNamedArguments(t *testing.T) {
	t.Parallel()
	s := New(nil, Config{Subjects: broker.Subjects{Prefix: "T"}})
	claim := Change{
		ID: uuid.New(), From: StatusQueued, Version: 1, To: StatusDispatching, Kind: "claimed", Actor: "worker:w",
		LeaseOwner: "w", LeaseFor: time.Minute,
	}
	review := Change{
		ID: uuid.New(), From: StatusUnknown, Version: 3, To: StatusReview, Kind: "review", Actor: "system",
		Review: &Review{Reason: ReasonUnmatchedEvidence, Owner: "ops", Deadline: time.Now()},
	}
	var ts []*transition
	for name, c := range map[string]Change{"claim": claim, "review": review} {
		tr, err := newTransition(context.Background(), c, &Target{Account: "a"})
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		ts = append(ts, tr)
	}
	args, err := s.transitionsArgs(ts)
	if err != nil || len(args) != len(transitionsStmt.names) {
		t.Errorf("operationTransitions: %d positional arguments, err %v", len(args), err)
	}
	call, err := s.newEnqueueCall(context.Background(), EnqueueRequest{TenantID: uuid.New(), Action: "a", Provider: "p", Params: []byte(`{}`), ApprovalID: uuid.New()})
	if err != nil {
		t.Fatal(err)
	}
	if args, err := call.namedArgs(); err != nil || len(args) != 18 {
		t.Errorf("operationEnqueue: %d positional arguments, err %v", len(args), err)
	}
}

// TestNamedStatementMatchesPgxRewriteAndRefusesMissingOrExtra holds the
// once-rewritten statements to pgx's own StrictNamedArgs: the same
// positional SQL and argument order, and the same refusals.
func TestNamedStatementMatchesPgxRewriteAndRefusesMissingOrExtra(t *testing.T) {
	t.Parallel()
	const sql = `SELECT @b::int + @a::int, @b::int -- not @c
, '@d'`
	stmt := mustNamed(sql)
	wantSQL, wantArgs, err := pgx.StrictNamedArgs{"a": 1, "b": 2}.RewriteQuery(t.Context(), nil, sql, nil)
	if err != nil {
		t.Fatal(err)
	}
	got, err := stmt.args(pgx.StrictNamedArgs{"a": 1, "b": 2})
	if err != nil || stmt.SQL != wantSQL || len(got) != len(wantArgs) || got[0] != wantArgs[0] || got[1] != wantArgs[1] {
		t.Errorf("mustNamed: %q %v, %v; pgx: %q %v", stmt.SQL, got, err, wantSQL, wantArgs)
	}
	for name, args := range map[string]pgx.StrictNamedArgs{
		"missing": {"a": 1},
		"extra":   {"a": 1, "b": 2, "c": 3},
		"renamed": {"a": 1, "x": 2},
	} {
		if _, err := stmt.args(args); err == nil {
			t.Errorf("%s argument accepted", name)
		}
	}
}
