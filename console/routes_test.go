package console_test

import (
	"flag"
	"os"
	"testing"

	"github.com/actledger/actledger/console"
)

var update = flag.Bool("update", false, "rewrite docs/console.md from the console's route table")

// TestRoutesDocMatchesRouteTable keeps docs/console.md and the route table
// the console registers identical.
func TestRoutesDocMatchesRouteTable(t *testing.T) {
	t.Parallel()
	const path = "../docs/console.md"
	want := console.RoutesMarkdown()
	if *update {
		if err := os.WriteFile(path, []byte(want), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != want {
		t.Errorf("docs/console.md is out of date with the console's routes; run go test ./console -run RoutesDoc -update")
	}
}
