package ledger_test

import (
	"os"
	"strings"
	"testing"

	"github.com/actledger/actledger/ledger"
)

// TestREADMEListsEveryReviewReason keeps the operators' list of review
// reasons (README.md, "Review reasons:") true to the one definition.
func TestREADMEListsEveryReviewReason(t *testing.T) {
	t.Parallel()
	readme, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, list, ok := strings.Cut(string(readme), "Review reasons:")
	if !ok {
		t.Fatal(`README.md has no "Review reasons:" list`)
	}
	list, _, _ = strings.Cut(list, "\n\n")
	for _, r := range ledger.ReviewReasons {
		if !strings.Contains(list, "`"+string(r)+"`") {
			t.Errorf("README.md's review reasons do not list %s", r)
		}
	}
}
