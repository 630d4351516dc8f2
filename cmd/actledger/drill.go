package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"

	"github.com/actledger/actledger/drill"
	"github.com/actledger/actledger/provider"
)

// exitCode is a failure that carries its own exit status and says what it says itself (msg, if
// not empty, on stderr), without the usage: a drill that failed (1) or was refused (2).
type exitCode struct {
	code int
	msg  string
}

func (e *exitCode) Error() string { return e.msg }

// drillCmd is `actledger drill ACTION --params JSON [--providers FILE] [--only S1,S2]
// [--report FILE.md] [--json FILE.json] [--database-url URL] [--allow-production]
// [--patience D]`: the contract's failure scenarios against the provider as configured, on a
// ledger of the drill's own (docs/drills.md). Progress goes to stderr; the Markdown report to
// --report, or to stdout without it; the JSON to --json. Exit 0 when every scenario that ran
// passed, 1 when one failed or could not be established (or the drill could not run), 2 on bad
// arguments or a refused provider. DATABASE_URL is never read: a drill never touches the ledger
// of a deployment unless --database-url names a database, which must hold no operations.
func drillCmd(ctx context.Context, getenv func(string) string, args []string, stdout, stderr io.Writer, logger *slog.Logger) error {
	fs := newFlagSet("drill", io.Discard)
	params := fs.String("params", "", "the action's params, a JSON object (required)")
	providers := fs.String("providers", getenv("PROVIDERS_FILE"), "providers config file; default $PROVIDERS_FILE")
	only := fs.String("only", "", "run these scenarios only, comma-separated: "+strings.Join(drill.Scenarios, ","))
	reportFile := fs.String("report", "", "write the Markdown report to this file (default: stdout)")
	jsonFile := fs.String("json", "", "write the JSON report to this file")
	databaseURL := fs.String("database-url", "", "an empty database for the drill's ledger (default: a private Postgres from the local binaries, removed afterwards)")
	allowProduction := fs.Bool("allow-production", false, "send to a provider whose environment is production")
	patience := fs.Duration("patience", drill.DefaultPatience, "how long one scenario waits for its operation to settle")
	pos, err := parseInterspersed(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return fmt.Errorf("drill takes one ACTION, got %d: %w", len(pos), errUsage)
	}
	if *params == "" {
		return fmt.Errorf("drill: --params JSON is required: %w", errUsage)
	}
	if *providers == "" {
		return fmt.Errorf("drill: name the providers file with --providers or PROVIDERS_FILE: %w", errUsage)
	}
	if *patience <= 0 {
		return fmt.Errorf("drill: --patience must be positive, got %s: %w", *patience, errUsage)
	}
	registry, err := provider.LoadEnv(*providers, getenv)
	if err != nil {
		return &exitCode{code: 2, msg: err.Error()}
	}
	opts := drill.Options{
		Registry: registry, Action: pos[0], Params: json.RawMessage(*params), DatabaseURL: *databaseURL,
		AllowProduction: *allowProduction, Patience: *patience, Progress: stderr, Logger: logger,
	}
	if *only != "" {
		opts.Only = strings.Split(*only, ",")
	}
	if _, err := drill.Check(opts); err != nil {
		return &exitCode{code: 2, msg: err.Error()}
	}
	report, runErr := drill.Run(ctx, opts)
	if report == nil {
		if errors.Is(runErr, drill.ErrRefused) {
			return &exitCode{code: 2, msg: runErr.Error()}
		}
		return fmt.Errorf("drill: %w", runErr)
	}
	if err := writeReports(report, *reportFile, *jsonFile, stdout); err != nil {
		return err
	}
	failed, unknown := report.Failed()
	switch {
	case runErr != nil:
		return fmt.Errorf("%w (the report lists the scenarios that did not finish and the effects made so far)", runErr)
	case report.Passed:
		fmt.Fprintf(stderr, "drill: passed: %d scenarios, every one with at most one effect at the supplier\n", len(report.Scenarios))
		return nil
	default:
		return &exitCode{code: 1, msg: fmt.Sprintf("drill: %d failed, %d not established, of %d scenarios", failed, unknown, len(report.Scenarios))}
	}
}

// writeReports writes the Markdown (to mdFile, or stdout) and the JSON (to jsonFile, if set).
func writeReports(report *drill.Report, mdFile, jsonFile string, stdout io.Writer) error {
	var md bytes.Buffer
	if err := report.WriteMarkdown(&md); err != nil {
		return err
	}
	if mdFile == "" {
		if _, err := stdout.Write(md.Bytes()); err != nil {
			return err
		}
	} else if err := os.WriteFile(mdFile, md.Bytes(), 0o644); err != nil {
		return fmt.Errorf("drill: --report: %w", err)
	}
	if jsonFile != "" {
		var js bytes.Buffer
		if err := report.WriteJSON(&js); err != nil {
			return err
		}
		if err := os.WriteFile(jsonFile, js.Bytes(), 0o644); err != nil {
			return fmt.Errorf("drill: --json: %w", err)
		}
	}
	return nil
}
