package packagedoc_test

import (
	"strings"
	"testing"

	"github.com/actledger/actledger/internal/golden"
	"github.com/actledger/actledger/internal/packagedoc"
)

// TestPackagesDocListsEveryPackage keeps docs/packages.md identical to the
// packages go list finds and their doc comments, and fails for a package
// that has no doc comment.
func TestPackagesDocListsEveryPackage(t *testing.T) {
	t.Parallel()
	pkgs, err := packagedoc.List(t.Context(), "../..")
	if err != nil {
		t.Fatal(err)
	}
	if len(pkgs) == 0 {
		t.Fatal("go list found no package")
	}
	if missing := packagedoc.Undocumented(pkgs); len(missing) > 0 {
		t.Errorf("packages without a doc comment (write one: it is their line in docs/packages.md): %s", strings.Join(missing, ", "))
	}
	golden.Check(t, "../../docs/packages.md", packagedoc.Markdown(pkgs), packagedoc.Regenerate)
}

// TestMarkdownSortsAndEscapes: a command, a package and an internal
// package land in their own sections, and a | in a doc comment does not
// break the table.
func TestMarkdownSortsAndEscapes(t *testing.T) {
	t.Parallel()
	got := packagedoc.Markdown([]packagedoc.Package{
		{Dir: "cmd/tool", Name: "main", Doc: "Command tool runs."},
		{Dir: "ledger", Name: "ledger", Doc: "Package ledger keeps a|b."},
		{Dir: "internal/testdb", Name: "testdb", Doc: ""},
	})
	for _, want := range []string{
		"## Commands\n\n| package | what it is for |\n|---|---|\n| [`cmd/tool`](../cmd/tool) | Command tool runs. |\n\n## Packages",
		"| [`ledger`](../ledger) | Package ledger keeps a\\|b. |\n\n## Internal packages",
		"| [`internal/testdb`](../internal/testdb) | — |\n",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("Markdown lacks %q; got:\n%s", want, got)
		}
	}
}
