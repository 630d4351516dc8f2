package console_test

import (
	"testing"

	"github.com/actledger/actledger/console"
	"github.com/actledger/actledger/internal/golden"
)

// TestRoutesDocMatchesRouteTable keeps docs/console.md and the route table
// the console registers identical.
func TestRoutesDocMatchesRouteTable(t *testing.T) {
	t.Parallel()
	golden.Check(t, "../docs/console.md", console.RoutesMarkdown(), "go test ./console -run RoutesDoc -update")
}
