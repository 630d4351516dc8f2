package app_test

import (
	"os/exec"
	"slices"
	"strings"
	"testing"
)

// module is the import path every package of actledger starts with.
const module = "github.com/actledger/actledger/"

// isTestDouble says whether pkg (relative to module) exists only to test
// or measure actledger: the test helpers (internal/test…), the fill and
// EXPLAIN checks of a large ledger (internal/bigledger), and the
// supplier doubles (internal/mocksupplier and the fakes under it).
func isTestDouble(pkg string) bool {
	if pkg == "internal/testsignal" {
		// The production half of a test signal (River's idiom): components
		// hold their signals, which do nothing unless a test arms them.
		return false
	}
	return strings.HasPrefix(pkg, "internal/test") ||
		pkg == "internal/bigledger" || strings.HasPrefix(pkg, "internal/bigledger/") ||
		pkg == "internal/mocksupplier" || strings.HasPrefix(pkg, "internal/mocksupplier/")
}

// mayImportTestDouble says whether pkg may import the test double dep,
// both relative to module: a double may build on another, and so may
// the programs that exist to drive them (the benchmark, the chaos run,
// the mock supplier's command) and the examples; `actledger demo` runs
// the demo supplier in its own process, so cmd/actledger may import that
// one package and no other double.
func mayImportTestDouble(pkg, dep string) bool {
	switch {
	case isTestDouble(pkg):
		return true
	case slices.Contains([]string{"cmd/actbench", "cmd/actchaos", "cmd/mocksupplier"}, pkg):
		return true
	case strings.HasPrefix(pkg, "examples/"):
		return true
	case pkg == "cmd/actledger":
		return dep == "internal/mocksupplier"
	}
	return false
}

// TestProductPackagesImportNoTestDouble holds the product to what its
// test doubles' docs promise: no package of it imports, outside its
// _test.go files, a test helper, the large-ledger harness or a supplier
// fake, so none of them can reach a build of actledger by a path that
// the tests do not see. A package that must list what the harness checks
// (the bounded queries) describes it with internal/bounded, which the
// harness imports instead.
func TestProductPackagesImportNoTestDouble(t *testing.T) {
	t.Parallel()
	out, err := exec.Command("go", "list", "-f", "{{.ImportPath}}{{range .Imports}} {{.}}{{end}}", module+"...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	var listed []string
	for line := range strings.Lines(string(out)) {
		fields := strings.Fields(line)
		if len(fields) == 0 {
			continue
		}
		pkg := strings.TrimPrefix(fields[0], module)
		listed = append(listed, pkg)
		for _, dep := range fields[1:] {
			dep, ours := strings.CutPrefix(dep, module)
			if ours && isTestDouble(dep) && !mayImportTestDouble(pkg, dep) {
				t.Errorf("%s imports %s%s, a test double, outside its tests", pkg, module, dep)
			}
		}
	}
	// An empty or unreadable listing would pass every package: the
	// product's own must be in it.
	for _, want := range []string{"app", "ledger", "relay", "metrics", "cmd/actledger"} {
		if !slices.Contains(listed, want) {
			t.Errorf("go list named no package %s (%d listed)", want, len(listed))
		}
	}
}
