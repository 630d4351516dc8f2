package ledger_test

import (
	"context"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/actledger/actledger/internal/golden"
	"github.com/actledger/actledger/internal/testdb"
	"github.com/actledger/actledger/ledger"
)

// TestStatesDocMatchesTransitionTable keeps docs/states.md and the code's
// one transition table identical (go test ./ledger -update rewrites it).
func TestStatesDocMatchesTransitionTable(t *testing.T) {
	t.Parallel()
	golden.Check(t, "../docs/states.md", ledger.StatesMarkdown(), "go test ./ledger -run StatesDoc -update")
}

// TestSchemaCheckListsEveryStatus keeps the operations.status CHECK
// constraint, as the migrated database holds it, and the Go enum
// identical.
func TestSchemaCheckListsEveryStatus(t *testing.T) {
	t.Parallel()
	pool := testdb.New(t)
	var def string
	if err := pool.QueryRow(context.Background(), `SELECT pg_get_constraintdef(c.oid) FROM pg_constraint c
WHERE c.conrelid = 'operations'::regclass AND c.conname = 'operations_status_check'`).Scan(&def); err != nil {
		t.Fatalf("the CHECK on operations.status: %v", err)
	}
	var inSchema []string
	for _, m := range regexp.MustCompile(`'([a-z_]+)'`).FindAllStringSubmatch(def, -1) {
		inSchema = append(inSchema, m[1])
	}
	var inGo []string
	for _, s := range ledger.Statuses {
		inGo = append(inGo, string(s))
	}
	slices.Sort(inSchema)
	slices.Sort(inGo)
	if !slices.Equal(inSchema, inGo) {
		t.Errorf("schema CHECK %v != Go statuses %v", inSchema, inGo)
	}
}

func TestEveryStatusHasTransitionsAndSummary(t *testing.T) {
	t.Parallel()
	for _, s := range ledger.Statuses {
		if !s.Valid() {
			t.Errorf("%s not in the transition table", s)
		}
		for _, to := range ledger.Transitions[s] {
			if !to.Valid() {
				t.Errorf("%s → %s: unknown target", s, to)
			}
		}
		if strings.Contains(s.Summary("x"), "not known") {
			t.Errorf("%s has no summary", s)
		}
	}
	if !strings.Contains(ledger.StatusUnknown.Summary("x"), "do not repeat") {
		t.Error("the unknown summary must tell the agent not to repeat the action")
	}
}
