package action_test

import (
	"os/exec"
	"strings"
	"testing"
)

// TestActionLinksNoSupplierAdapter holds the package to its doc: a
// contract never talks to a supplier, so neither it nor anything it
// imports may link package provider (which imports this one to bind each
// action to its provider, never the reverse), the webhook signatures or an
// HTTP client, nor the ledger's Postgres or the transport's NATS.
func TestActionLinksNoSupplierAdapter(t *testing.T) {
	t.Parallel()
	out, err := exec.Command("go", "list", "-deps", "github.com/actledger/actledger/action").CombinedOutput()
	if err != nil {
		t.Fatalf("go list -deps ./action: %v\n%s", err, out)
	}
	for _, pkg := range strings.Fields(string(out)) {
		switch {
		case pkg == "github.com/actledger/actledger/provider", pkg == "github.com/actledger/actledger/webhook", pkg == "net/http",
			strings.Contains(pkg, "nats"), strings.Contains(pkg, "pgx"):
			t.Errorf("action links %s", pkg)
		}
	}
}
