package drill_test

import (
	"strings"
	"testing"

	"github.com/actledger/actledger/drill"
)

func TestDrillReportShowsEveryCharacterOfASuppliersReferenceAndKeepsItsTableWhole(t *testing.T) {
	t.Parallel()
	hostile := "re_1|`\u202eevil\n| forged | row |"
	report := &drill.Report{Action: "a", Provider: "p", Effects: []drill.Effect{{Scenario: "lost_response", Reference: "al_1", ProviderReference: &hostile}}}
	var md strings.Builder
	if err := report.WriteMarkdown(&md); err != nil {
		t.Fatal(err)
	}
	got := md.String()
	row := ""
	for _, line := range strings.Split(got, "\n") {
		if strings.HasPrefix(line, "| lost_response |") {
			row = line
		}
	}
	for _, want := range []string{`\u202e`, `\u000a`, `re_1\|`, "`` "} {
		if !strings.Contains(row, want) {
			t.Errorf("the effect's row %q does not show %q", row, want)
		}
	}
	if strings.ContainsRune(got, '\u202e') || strings.Contains(got, "\n| forged |") {
		t.Errorf("the reference reached the report raw:\n%s", got)
	}
}
