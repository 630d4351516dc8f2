package ledger

import (
	"regexp"
	"slices"
	"testing"
)

// TestSQLOutcomeHistoryNamesOnlyKnownEventKinds holds operationOutcomeOpen,
// which reads a history in SQL, to the event kinds the Go readers branch
// on: a kind renamed in Go but not in the statement (or misspelt there)
// would silently never match.
func TestSQLOutcomeHistoryNamesOnlyKnownEventKinds(t *testing.T) {
	t.Parallel()
	known := []EventKind{EventAttempt, EventEvidence, EventStaleResult, EventLeaseExpired, EventLookupFound,
		EventLookupAbsentConfirmed, EventReplayLookupAbsent, EventLookupAbsentTooEarly, EventLookupFailed}
	var named []EventKind
	for _, m := range regexp.MustCompile(`kind (?:= '(\w+)'|IN \(([^)]*)\))`).FindAllStringSubmatch(operationOutcomeOpen, -1) {
		named = append(named, EventKind(m[1]))
		for _, q := range regexp.MustCompile(`'(\w+)'`).FindAllStringSubmatch(m[2], -1) {
			named = append(named, EventKind(q[1]))
		}
	}
	named = slices.DeleteFunc(named, func(k EventKind) bool { return k == "" })
	if len(named) < 6 {
		t.Fatalf("found only %v in operationOutcomeOpen; the pattern no longer reads it", named)
	}
	for _, k := range named {
		if !slices.Contains(known, k) {
			t.Errorf("operationOutcomeOpen names event kind %q, which no EventKind constant defines", k)
		}
	}
}
