package main

import (
	"bytes"
	"context"
	"errors"
	"io"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/actledger/actledger/internal/testdb"
)

// TestDemoShowsTwoOrdersNaiveAndOneWithActledger runs `actledger demo` against a fresh database
// and checks that it tells the contract's story from real counts: two orders at the supplier
// after a naive retry, one through actledger, whose operation went through unknown to succeeded
// by a lookup.
func TestDemoShowsTwoOrdersNaiveAndOneWithActledger(t *testing.T) {
	t.Parallel()
	_, dbURL := testdb.NewWithURL(t)
	getenv := onlyDatabase(dbURL)
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()

	var out, stderr bytes.Buffer
	began := time.Now()
	if err := run(ctx, []string{"demo"}, getenv, &out, &stderr); err != nil {
		t.Fatalf("demo: %v\nstdout:\n%s\nstderr:\n%s", err, &out, &stderr)
	}
	if took := time.Since(began); took > 30*time.Second {
		t.Errorf("demo took %s, want under 30s", took)
	}
	got := out.String()
	naive, ours, found := strings.Cut(got, "2. The same intention through actledger")
	if !found {
		t.Fatalf("no actledger section in:\n%s", got)
	}
	// The right column counts the supplier's orders and the create requests that reached it:
	// the naive agent really sent twice, actledger really sent once.
	for _, tc := range []struct {
		section, name string
		want, never   []string
	}{
		{naive, "naive", []string{
			"→ error: connection closed, no answer (EOF)",
			"1 order, 1 POST received",
			"2 orders, 2 POSTs received",
			"verdict   naive retry: 2 orders for 1 intention",
		}, nil},
		{ours, "actledger", []string{
			"0 orders, 0 POSTs received",
			// What the agent read through GET /v1/operations/{id}, on the same row as the
			// truth at that moment.
			"→ status unknown              1 order, 1 POST received",
			"Idempotent-Replayed: true",
			"→ status succeeded            1 order, 1 POST received",
			"verdict   actledger: 1 order for 1 intention",
			// The history from GET /v1/operations/{id}/events.
			"created          → queued",
			"attempt          dispatching → unknown",
			"claimed          unknown → dispatching",
			"lookup_found     dispatching → succeeded",
			// Where to go next: the same proof on the reader's own supplier.
			"actledger drill ACTION --params JSON --providers FILE",
		}, []string{"2 orders", "2 POSTs"}},
	} {
		for _, want := range tc.want {
			if !strings.Contains(tc.section, want) {
				t.Errorf("%s section lacks %q:\n%s", tc.name, want, tc.section)
			}
		}
		for _, never := range tc.never {
			if strings.Contains(tc.section, never) {
				t.Errorf("%s section shows %q:\n%s", tc.name, never, tc.section)
			}
		}
	}
	for i, line := range strings.Split(got, "\n") {
		if n := utf8.RuneCountInString(line); n > 100 {
			t.Errorf("line %d is %d columns wide, want at most 100: %q", i+1, n, line)
		}
	}
	// The story goes to stdout; the components it runs only warn.
	for _, quiet := range []string{"level=INFO", "level=DEBUG"} {
		if strings.Contains(stderr.String(), quiet) {
			t.Errorf("demo logged below warn level:\n%s", &stderr)
		}
	}
}

// TestDemoRejectsUnknownArguments: a typo is a usage error, before anything starts.
func TestDemoRejectsUnknownArguments(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{{"demo", "--fast"}, {"demo", "now"}, {"demo", "--timeout", "0s"}} {
		err := run(t.Context(), args, func(string) string { return "" }, io.Discard, io.Discard)
		if !errors.Is(err, errUsage) {
			t.Errorf("run %q = %v, want a usage error", args, err)
		}
	}
}
