// Package golden keeps generated documents in the repository identical to
// the code they are generated from (docs/states.md from the transition
// table, docs/console.md from the console's routes): a test compares the
// file with what the code generates now, and `go test -update` rewrites it.
package golden

import (
	"flag"
	"os"
	"testing"
)

// update is the test binary's -update flag: a test package that imports
// golden takes it.
var update = flag.Bool("update", false, "rewrite the generated documents the tests compare")

// Check fails t unless the file at path holds want; with -update it writes
// want there first. regenerate is the command that rewrites the file, for
// the failure message.
func Check(t testing.TB, path, want, regenerate string) {
	t.Helper()
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
		t.Errorf("%s is out of date with the code it is generated from; run %s", path, regenerate)
	}
}
