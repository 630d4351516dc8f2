package ledger_test

import (
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/actledger/actledger/internal/golden"
	"github.com/actledger/actledger/ledger"
	"github.com/actledger/actledger/schema"
)

// TestStatesDocMatchesTransitionTable keeps docs/states.md and the code's
// one transition table identical (go test ./ledger -update rewrites it).
func TestStatesDocMatchesTransitionTable(t *testing.T) {
	t.Parallel()
	golden.Check(t, "../docs/states.md", ledger.StatesMarkdown(), "go test ./ledger -run StatesDoc -update")
}

// TestSchemaCheckListsEveryStatus keeps the operations.status CHECK
// constraint and the Go enum identical.
func TestSchemaCheckListsEveryStatus(t *testing.T) {
	t.Parallel()
	migrations, err := schema.Migrations()
	if err != nil {
		t.Fatal(err)
	}
	var all strings.Builder
	for _, m := range migrations {
		all.WriteString(m.SQL)
	}
	// The newest definition counts: a later migration replaces the CHECK
	// under its name.
	checks := regexp.MustCompile(`(?s)(?:status\s+text NOT NULL|ADD CONSTRAINT operations_status_check) CHECK \(status IN \((.*?)\)\)`).FindAllStringSubmatch(all.String(), -1)
	if checks == nil {
		t.Fatal("no CHECK on operations.status found")
	}
	check := checks[len(checks)-1]
	var inSchema []string
	for _, m := range regexp.MustCompile(`'([a-z_]+)'`).FindAllStringSubmatch(check[1], -1) {
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
