package ledger_test

import (
	"os/exec"
	"strings"
	"testing"
)

// TestLedgerLinksNoNATSPackage holds the ledger to its doc: it is the
// source of truth in Postgres and never talks to the transport, so neither
// it nor anything it imports (the outbox rows among them) may link a NATS
// package. The relay, which does, lives in package relay.
func TestLedgerLinksNoNATSPackage(t *testing.T) {
	t.Parallel()
	out, err := exec.Command("go", "list", "-deps", "github.com/actledger/actledger/ledger").CombinedOutput()
	if err != nil {
		t.Fatalf("go list -deps ./ledger: %v\n%s", err, out)
	}
	var nats []string
	for _, pkg := range strings.Fields(string(out)) {
		if strings.Contains(pkg, "nats") {
			nats = append(nats, pkg)
		}
	}
	if len(nats) > 0 {
		t.Errorf("ledger links NATS packages: %s", strings.Join(nats, ", "))
	}
}
