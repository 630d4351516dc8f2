package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/actledger/actledger/ledger"
	"github.com/actledger/actledger/provider"
)

// renderKey is the external key `providers check --render` builds its
// request with, unless --key names another: one of the shape the ledger
// gives every operation.
var renderKey = ledger.ExternalKeyOfID(uuid.MustParse("00000000-0000-4000-8000-000000000000"))

// providersCmd is `actledger providers check [FILE] [--render ACTION
// --params JSON [--key K]]`: it loads a providers file as serve would
// (expressions compiled, credentials and secrets read from the
// environment) and says, per action, what actledger does after a lost
// response; with --render it prints the create request it would send,
// the credential masked. It opens no database and calls no supplier.
func providersCmd(ctx context.Context, getenv func(string) string, args []string, stdout io.Writer) error {
	if len(args) == 0 || args[0] != "check" {
		return fmt.Errorf("providers needs the command check: %w", errUsage)
	}
	fs := newFlagSet("providers check", io.Discard)
	render := fs.String("render", "", "print the create request of this action")
	params := fs.String("params", "{}", "the params (a JSON object) for --render")
	key := fs.String("key", renderKey, "the external key for --render")
	files, err := parseInterspersed(fs, args[1:])
	if err != nil {
		return err
	}
	path := getenv("PROVIDERS_FILE")
	switch len(files) {
	case 0:
		if path == "" {
			return fmt.Errorf("providers check: name a FILE or set PROVIDERS_FILE: %w", errUsage)
		}
	case 1:
		path = files[0]
	default:
		return fmt.Errorf("providers check takes one FILE, got %q: %w", files, errUsage)
	}
	reg, err := provider.LoadEnv(path, getenv)
	if err != nil {
		return err
	}
	if *render != "" {
		return renderCreate(ctx, reg, *render, *key, *params, stdout)
	}
	receivers := ""
	if n := len(reg.Notifications()); n > 0 {
		receivers = ", " + count(n, "notification receiver")
	}
	fmt.Fprintf(stdout, "%s: valid: %s, %s%s.\n", path, count(len(reg.Providers()), "provider"), count(len(reg.Actions()), "action"), receivers)
	for _, action := range reg.Actions() {
		pc, _ := reg.ForAction(action)
		fmt.Fprintf(stdout, "\n%s: provider %s, %s %s%s (account %q, environment %q)\n", action, pc.Name, pc.Create.Method, pc.BaseURL, pc.Create.Path, pc.Account, pc.Environment)
		if contract, _ := reg.Action(action); contract.HasBusinessKey() {
			fmt.Fprintf(stdout, "  one operation per business key %s, whatever key the caller sends (kept as its client key)\n", contract.Key)
		}
		for _, line := range describe(pc, getenv) {
			fmt.Fprintf(stdout, "  %s\n", line)
		}
	}
	for _, n := range reg.Notifications() {
		fmt.Fprintf(stdout, "\nnotifications %s: %s of tenant %q, POST %s, signed as Standard Webhooks (secret from %s)\n",
			n.Name, strings.Join(n.Events, ", "), n.Tenant, n.URL, n.SecretEnv)
	}
	return nil
}

// renderCreate prints the request the provider of action would send for
// params under key, as it would go on the wire, the credential masked.
func renderCreate(ctx context.Context, reg *provider.Registry, action, key, params string, stdout io.Writer) error {
	pc, ok := reg.ForAction(action)
	if !ok {
		return fmt.Errorf("providers check --render: the file has no action %q (it has %s)", action, strings.Join(reg.Actions(), ", "))
	}
	if !json.Valid([]byte(params)) {
		return errors.New("providers check --render: --params is not JSON")
	}
	if contract, ok := reg.Action(action); ok {
		if err := contract.CheckParams([]byte(params)); err != nil {
			return fmt.Errorf("providers check --render: the action's params_schema refuses them: %w", err)
		}
	}
	r, err := pc.RenderCreate(ctx, key, json.RawMessage(params))
	if err != nil {
		return fmt.Errorf("providers check --render: nothing would be sent, the operation would go to review provider_config_error: %w", err)
	}
	fmt.Fprintf(stdout, "%s %s\n", r.Method, r.URL)
	for _, name := range slices.Sorted(maps.Keys(r.Header)) {
		for _, v := range r.Header[name] {
			fmt.Fprintf(stdout, "%s: %s\n", name, v)
		}
	}
	fmt.Fprintf(stdout, "\n%s\n", r.Body)
	return nil
}

// describe says in plain words what actledger does with the provider's
// answers, above all after a lost response.
func describe(pc *provider.Config, getenv func(string) string) []string {
	var lines []string
	if pc.Auth != nil {
		lines = append(lines, "credentials: "+authWords(pc.Auth)+", sent only to "+pc.BaseURL)
	}
	idem, lookup := pc.Idempotency, pc.Lookup
	var lost string
	switch {
	case idem != nil && lookup != nil:
		lost = fmt.Sprintf("resends with the same key (header %s) until the key's retention of %s ends; after that looks the effect up (GET %s) once %s have passed since the last send: one record settles it succeeded, none lets it be resent with the same key, two or more go to a person (duplicate_effect)",
			idem.Header, short(idem.Retention.Duration), lookup.Path, short(lookup.VisibilityLag.Duration))
	case idem != nil:
		lost = fmt.Sprintf("resends with the same key (header %s) until the key's retention of %s ends; after that it holds the operation for a person (review), since the supplier has no lookup",
			idem.Header, short(idem.Retention.Duration))
	case lookup != nil:
		lost = fmt.Sprintf("never resends blindly (the supplier takes no idempotency key): looks the effect up (GET %s) once %s have passed since the last send: one record settles it succeeded, none lets it be resent, two or more go to a person (duplicate_effect)",
			lookup.Path, short(lookup.VisibilityLag.Duration))
	default:
		lost = "holds the operation for a person (review outcome_unknown): the supplier takes no idempotency key and has no lookup"
	}
	if lookup != nil && lookup.Complete != "" {
		lost += fmt.Sprintf("; an answer for which lookup.complete (%s) is false is inconclusive: never taken for absent, asked again after %s, and held for a person (outcome_unknown) once the retry budget ends",
			strings.Join(strings.Fields(lookup.Complete), " "), short(lookup.VisibilityLag.Duration))
	}
	lines = append(lines, "after a lost response (timeout, reset, 5xx): "+lost+".")
	if pc.WebhookSecretEnv != "" || pc.Webhook != nil {
		env := pc.WebhookSecretEnv
		if pc.Webhook != nil {
			env = pc.Webhook.SecretEnv
		}
		lines = append(lines, fmt.Sprintf("webhooks: signed %s (secret from %s), at /v1/webhooks/%s; one naming the operation's key settles an unknown outcome too",
			pc.SignatureScheme(), env, pc.Name))
		if len(pc.WebhookSecretsFrom(getenv)) == 0 {
			lines = append(lines, fmt.Sprintf("warning: %s is not set here: every webhook would be refused (401)", env))
		}
	}
	if pc.Reconcile != nil {
		lines = append(lines, "reconcile: "+pc.Reconcile.Describe())
	}
	for i, r := range pc.Outcomes {
		lines = append(lines, fmt.Sprintf("outcomes[%d]: when %s → %s (%s)", i, strings.Join(strings.Fields(r.When), " "), r.Outcome, r.Reason))
	}
	lines = append(lines, fmt.Sprintf("retries of answers that prove nothing was done (429, 503 with Retry-After): %d attempts within %s, then a person (retries_exhausted)",
		pc.Retry.MaxAttempts, short(pc.Retry.MaxElapsed.Duration)))
	return lines
}

func authWords(a *provider.Auth) string {
	switch {
	case a.BearerEnv != "":
		return "Authorization: Bearer from " + a.BearerEnv
	case a.Basic != nil:
		return "Authorization: Basic from " + a.Basic.UsernameEnv + " and " + a.Basic.PasswordEnv
	default:
		return a.Header.Name + " from " + a.Header.ValueEnv
	}
}

// short writes d as a person would: 24h, 1m30s, 2m.
func short(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}

func count(n int, what string) string {
	if n == 1 {
		return "1 " + what
	}
	return fmt.Sprintf("%d %ss", n, what)
}
