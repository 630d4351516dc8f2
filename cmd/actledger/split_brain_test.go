package main

import (
	"context"
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/actledger/actledger/internal/testpg"
)

// TestTwoWritableHostsInTheURLStopEveryCommand: a standby promoted while
// the old primary still runs (split brain) leaves two hosts of a
// multi-host DATABASE_URL taking writes; actledger refuses to start,
// naming both, until the old primary is fenced (here: killed), and then
// runs on the promoted one.
func TestTwoWritableHostsInTheURLStopEveryCommand(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pair := testpg.New(t, false, "actledger")
	primary, standby, dbURL := pair.Primary, pair.Standby, pair.URL("actledger")
	getenv := func(k string) string {
		if k == "DATABASE_URL" {
			return dbURL
		}
		return ""
	}
	if err := run(ctx, []string{"migrate"}, getenv, io.Discard, io.Discard); err != nil {
		t.Fatalf("migrate with one primary and its standby: %v", err)
	}
	if err := standby.Promote(ctx); err != nil {
		t.Fatal(err)
	}
	err := run(ctx, []string{"migrate"}, getenv, io.Discard, io.Discard)
	if !errors.Is(err, errTwoPrimaries) || !strings.Contains(err.Error(), "127.0.0.1:"+primary.Port) || !strings.Contains(err.Error(), "127.0.0.1:"+standby.Port) {
		t.Fatalf("migrate with two writable hosts: %v, want errTwoPrimaries naming both", err)
	}
	if err := primary.Kill(); err != nil {
		t.Fatal(err)
	}
	if err := run(ctx, []string{"migrate"}, getenv, io.Discard, io.Discard); err != nil {
		t.Fatalf("migrate once the old primary is fenced: %v", err)
	}
}
