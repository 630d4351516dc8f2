package main

import (
	"bytes"
	"io"
	"strings"
	"testing"

	"github.com/actledger/actledger/client"
)

// TestCommandLineMistakesExitTwoNamingTheMistake: a script calling the CLI
// wrongly gets exit status 2 and a line naming what was wrong before the
// usage (the usage alone used to be printed, without saying which flag or
// value was at fault), and an extra word is refused rather than silently
// dropped (`token create ... extra` used to create a token, `ops resolve ID
// --note two words` kept only "two", `migrate now` migrated).
func TestCommandLineMistakesExitTwoNamingTheMistake(t *testing.T) {
	t.Parallel()
	// Nothing here may reach a database or an API: both point at a closed
	// port, so a command that runs instead of refusing exits 1, not 2.
	env := map[string]string{
		"DATABASE_URL":    "postgres://127.0.0.1:1/none?sslmode=disable&connect_timeout=1",
		"ACTLEDGER_URL":   "http://127.0.0.1:1",
		"ACTLEDGER_TOKEN": "alt_unused",
	}
	getenv := func(k string) string { return env[k] }
	tests := []struct {
		args []string
		want string // in the line before the usage
	}{
		{[]string{"token", "create", "--tenant", "t", "--role", "admin"}, "--role agent|approver|operator|metrics"},
		{[]string{"token", "create", "--tenant", "t", "--role", "agent", "extra"}, `"extra"`},
		{[]string{"token", "create", "--tenant", "t", "--role", "agent", "--bogus"}, "-bogus"},
		{[]string{"token", "revoke"}, "one NAME or ID"},
		{[]string{"migrate", "now"}, "migrate takes no arguments"},
		{[]string{"serve", "extra"}, `"extra"`},
		{[]string{"ops", "list", "extra"}, "ops list takes no arguments"},
		{[]string{"ops", "dispatch", "extra"}, "ops dispatch takes no arguments"},
		{[]string{"ops", "show"}, "ops show ID"},
		{[]string{"ops", "retry", "01a2", "extra"}, `"extra"`},
		{[]string{"ops", "resolve", "01a2", "--outcome", "failed", "--note", "checked", "the", "portal"}, `"the" "portal"`},
		{[]string{"ops", "resolve", "01a2", "--outcome", "failed"}, "--note"},
		{[]string{"ops", "bogus"}, `unknown ops command "bogus"`},
		{[]string{"bogus"}, `unknown command "bogus"`},
		{[]string{"recover"}, "recover needs --since"},
		{[]string{"recover", "--since", "2999-01-01T00:00:00Z"}, "--since 2999-01-01T00:00:00Z is in the future"},
		{[]string{"recover", "--since", "yesterday"}, "not a duration"},
		{[]string{"recover", "--since", "-15m"}, "must not be negative"},
		{[]string{"recover", "--since", "15m", "--margin", "-1m"}, "must not be negative"},
		{[]string{"recover", "--since", "15m", "extra"}, `"extra"`},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			t.Parallel()
			var stderr bytes.Buffer
			got := exitStatus(run(t.Context(), tt.args, getenv, io.Discard, io.Discard), &stderr)
			if got != 2 {
				t.Fatalf("exit status %d, want 2; stderr:\n%s", got, stderr.String())
			}
			first, rest, _ := strings.Cut(stderr.String(), "\n")
			if !strings.HasPrefix(first, "actledger: ") || !strings.Contains(first, tt.want) {
				t.Errorf("first line %q, want the mistake (%s)", first, tt.want)
			}
			if !strings.Contains(rest, "Usage:") {
				t.Errorf("no usage after the mistake:\n%s", stderr.String())
			}
		})
	}
}

// TestFailuresExitOneWithTheirMessage: a failure that is no usage mistake
// (the API unreachable) exits 1 with its message, without the usage.
func TestFailuresExitOneWithTheirMessage(t *testing.T) {
	t.Parallel()
	getenv := func(k string) string {
		return map[string]string{"ACTLEDGER_URL": "http://127.0.0.1:1", "ACTLEDGER_TOKEN": "alt_unused"}[k]
	}
	var stderr bytes.Buffer
	if got := exitStatus(run(t.Context(), []string{"ops", "list"}, getenv, io.Discard, io.Discard), &stderr); got != 1 {
		t.Fatalf("exit status %d, want 1", got)
	}
	if !strings.Contains(stderr.String(), "127.0.0.1:1") || strings.Contains(stderr.String(), "Usage:") {
		t.Errorf("stderr %q, want the unreachable address and no usage", stderr.String())
	}
}

// TestAPIRefusalIsPrintedWithItsStatusAndCodeOnce: an API refusal reaches
// stderr as one line with its status, code and message, prefixed
// "actledger:" once (it used to read "actledger: actledger: 404 …").
func TestAPIRefusalIsPrintedWithItsStatusAndCodeOnce(t *testing.T) {
	t.Parallel()
	var stderr bytes.Buffer
	if got := exitStatus(&client.Error{Status: 404, Code: "not_found", Message: "no such object"}, &stderr); got != 1 {
		t.Fatalf("exit status %d, want 1", got)
	}
	if got, want := stderr.String(), "actledger: 404 not_found: no such object\n"; got != want {
		t.Errorf("stderr %q, want %q", got, want)
	}
}

// TestHelpOfEveryCommandExitsZero: -h, -help and --help print the usage on
// stdout and exit 0 for the commands that open the database or start
// services; they used to exit 2 ("flag: help requested"), and `migrate
// --help` migrated.
func TestHelpOfEveryCommandExitsZero(t *testing.T) {
	t.Parallel()
	getenv := func(k string) string {
		return map[string]string{"DATABASE_URL": "postgres://127.0.0.1:1/none?sslmode=disable&connect_timeout=1"}[k]
	}
	for _, args := range [][]string{
		{"serve", "--help"}, {"serve", "--roles", "api", "-h"}, {"migrate", "--help"}, {"token", "-help"},
		{"token", "create", "--help"}, {"token", "revoke", "-h"}, {"demo", "--help"}, {"notifications", "test", "--help"},
		{"drill", "--help"}, {"drill", "supplier.create_order", "-h"}, {"recover", "--since", "15m", "--help"},
	} {
		var stdout, stderr bytes.Buffer
		if got := exitStatus(run(t.Context(), args, getenv, &stdout, io.Discard), &stderr); got != 0 {
			t.Errorf("actledger %s: exit status %d, want 0; stderr %q", strings.Join(args, " "), got, stderr.String())
		}
		if !strings.Contains(stdout.String(), "Usage:") {
			t.Errorf("actledger %s: stdout %q, want the usage", strings.Join(args, " "), stdout.String())
		}
	}
}
