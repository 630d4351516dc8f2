// Command actledger runs and administers actledger: `serve` runs the
// pipeline (API, relay, dispatcher, reconciler, notifications), `migrate`
// applies the schema, `token` issues and revokes API tokens. See README.md.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"slices"
	"strings"
	"syscall"
)

const usage = `actledger: one approved intention, at most one external effect.

Usage:
  actledger serve [--roles api,relay,...] [--providers FILE]
  actledger migrate
  actledger prune --older-than 90d --archive DIR|- [--dry-run] [--batch N] [--providers FILE]
                                          archive, then delete, terminal operations older than that
  actledger recover --since T [--margin 1m] [--dry-run] [--batch N]
                                          after a failover or restore lost the ledger's latest changes:
                                          unsettled operations changed after T minus the margin become
                                          unknown, then the ledger_behind pauses are lifted
  actledger token create --tenant T --role agent|approver|operator|metrics [--name N] [--scope S]
  actledger token revoke NAME|ID
  actledger sessions end --subject S [--issuer I] | --people
  actledger demo [--timeout 30s]
  actledger ops list                      what waits for a person
  actledger ops show ID                   an operation, its review facts, its history
  actledger ops resolve ID --outcome succeeded|failed|cancelled [--reference R] --note N
  actledger ops resolve evidence/N --note N
  actledger ops retry ID [--note N]       send again with the same external key
  actledger ops replay [--since D] [--reason R] [--dry-run]
  actledger ops pause|resume [--provider P] [--action A]
                                          resume lifts every pause within the scope
  actledger ops dispatch                  pauses and calls in flight
  actledger reconcile PROVIDER [--since D] [--until T] [--dry-run]
                                          compare the ledger with the supplier's records now (operator token);
                                          exit 1 when the run failed or stopped early
  actledger approvals list                proposals waiting for a decision, params in full
  actledger approvals approve ID [--fingerprint F] [--ttl D] [--policy-version V] [--note N]
                                          without --fingerprint: shows the params, asks on a terminal
  actledger approvals deny ID --reason R
  actledger mcp                           MCP tools for an agent on stdin/stdout (agent token)
  actledger providers check [FILE]        validate a providers file; what happens after a lost response
  actledger providers check [FILE] --render ACTION --params JSON [--key K]
                                          the create request it would send, credential masked
  actledger notifications test RECEIVER [--providers FILE]
                                          send a signed test event; print the receiver's answer
  actledger drill ACTION --params JSON [--providers FILE] [--only S1,S2] [--report FILE.md]
                 [--json FILE.json] [--database-url URL] [--allow-production] [--patience D]
                                          prove the integration: the failure scenarios against the
                                          provider as configured, effects counted at the supplier,
                                          on a ledger of its own; exit 1 unless every one passed

Environment: DATABASE_URL, NATS_URL, LISTEN_ADDR, PROVIDERS_FILE,
LEASE_DURATION, STREAM_PREFIX, RETENTION_OLDER_THAN, RETENTION_ARCHIVE,
RETENTION_INTERVAL, CONSOLE_URL, NOTIFY_TIMEOUT, NOTIFY_RETRY_FOR,
NOTIFY_CONCURRENCY (see docs/configuration.md); ops commands use
ACTLEDGER_URL (default http://$LISTEN_ADDR) and ACTLEDGER_TOKEN (operator);
approvals commands the same with an approver token, mcp with an agent
token. ops, approvals and mcp accept help, -h and --help without a token.
`

// errUsage marks a command-line mistake: usage is printed, exit status 2.
var errUsage = errors.New("usage")

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	status := exitStatus(run(ctx, os.Args[1:], os.Getenv, os.Stdout, os.Stderr), os.Stderr)
	stop()
	os.Exit(status)
}

// exitStatus reports the outcome of a command as a script expects it: 0
// on success; 2 for a command-line mistake, with the mistake named before
// the usage (the usage alone does not say which flag or value was wrong);
// 1 for every other failure, with its message.
func exitStatus(err error, stderr io.Writer) int {
	var code *exitCode
	switch {
	case err == nil:
		return 0
	case errors.As(err, &code):
		if code.msg != "" {
			msg := code.msg
			if !strings.HasPrefix(msg, "actledger") {
				msg = "actledger: " + msg
			}
			fmt.Fprintln(stderr, msg)
		}
		return code.code
	case errors.Is(err, errUsage):
		if msg := strings.TrimSuffix(err.Error(), ": "+errUsage.Error()); msg != errUsage.Error() {
			fmt.Fprintln(stderr, "actledger:", msg)
		}
		fmt.Fprint(stderr, usage)
		return 2
	default:
		// An API refusal already names actledger ("actledger: 404
		// not_found: …"); say it once.
		msg := err.Error()
		if !strings.HasPrefix(msg, "actledger") {
			msg = "actledger: " + msg
		}
		fmt.Fprintln(stderr, msg)
		return 1
	}
}

// run runs one command; getenv is os.Getenv outside tests.
func run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		return errUsage
	}
	if args[0] == "help" || args[0] == "-h" || args[0] == "--help" {
		fmt.Fprint(stdout, usage)
		return nil
	}
	if asksForHelp(args) {
		fmt.Fprint(stdout, usage)
		return nil
	}
	env, err := loadEnv(getenv)
	if err != nil && args[0] != "ops" && args[0] != "approvals" && args[0] != "mcp" && args[0] != "providers" && args[0] != "reconcile" && args[0] != "drill" { // they read only ACTLEDGER_URL and ACTLEDGER_TOKEN, or PROVIDERS_FILE
		return err
	}
	logger := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: env.LogLevel}))
	switch args[0] {
	case "serve":
		return serve(ctx, env, args[1:], logger)
	case "migrate":
		if len(args) > 1 {
			return fmt.Errorf("migrate takes no arguments, got %q: %w", args[1:], errUsage)
		}
		return migrate(ctx, env, logger)
	case "prune":
		return prune(ctx, env, args[1:], stdout, logger)
	case "recover":
		return recoverCmd(ctx, env, args[1:], stdout, logger)
	case "token":
		return token(ctx, env, args[1:], stdout, logger)
	case "sessions":
		return sessions(ctx, env, args[1:], stdout, logger)
	case "demo":
		return demo(ctx, env, args[1:], stdout, logger)
	case "ops":
		return showErrors(ops(ctx, getenv, args[1:], stdout))
	case "approvals":
		return showErrors(approvals(ctx, getenv, args[1:], os.Stdin, stdout))
	case "mcp":
		return serveMCP(ctx, getenv, args[1:], os.Stdin, stdout, logger)
	case "providers":
		return providersCmd(ctx, getenv, args[1:], stdout)
	case "reconcile":
		return showErrors(reconcileCmd(ctx, getenv, args[1:], stdout))
	case "notifications":
		return notificationsCmd(ctx, env, args[1:], stdout)
	case "drill":
		return drillCmd(ctx, getenv, args[1:], stdout, stderr, logger)
	default:
		return fmt.Errorf("unknown command %q: %w", args[0], errUsage)
	}
}

// asksForHelp reports whether a command that opens the database, starts
// services or sends (serve, migrate, token, demo, prune, recover, notifications) was given -h, -help or --help:
// it prints the usage and exits 0, as Go's flag package does, instead of
// running or reporting a mistake.
func asksForHelp(args []string) bool {
	switch args[0] {
	case "serve", "migrate", "token", "sessions", "demo", "prune", "recover", "notifications", "drill":
		return slices.ContainsFunc(args[1:], func(a string) bool { return a == "-h" || a == "-help" || a == "--help" })
	}
	return false
}

// newFlagSet returns a flag set that reports errors instead of exiting.
func newFlagSet(name string, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	return fs
}

// parseInterspersed parses args with fs, taking flags before, between and
// after the positional arguments, and returns the positional ones in
// order (flag.Parse alone stops at the first).
func parseInterspersed(fs *flag.FlagSet, args []string) ([]string, error) {
	var positional []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, fmt.Errorf("%v: %w", err, errUsage)
		}
		if fs.NArg() == 0 {
			return positional, nil
		}
		positional, args = append(positional, fs.Arg(0)), fs.Args()[1:]
	}
}
