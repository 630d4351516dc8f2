package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"

	"github.com/actledger/actledger/auth"
	"github.com/actledger/actledger/ledger"
)

// token is `actledger token create|revoke`.
func token(ctx context.Context, e env, args []string, stdout io.Writer, logger *slog.Logger) error {
	if len(args) == 0 {
		return fmt.Errorf("token needs create or revoke: %w", errUsage)
	}
	switch args[0] {
	case "create":
		fs := newFlagSet("token create", io.Discard)
		tenant := fs.String("tenant", "", "tenant name (created if new)")
		role := fs.String("role", "", "agent, approver, operator or metrics (scrapes /metrics, nothing else)")
		name := fs.String("name", "", "token name, unique (generated if empty)")
		scope := fs.String("scope", "", "access scope inside the tenant (a department, a team); the token sees only its scope's work (empty: the whole tenant)")
		if err := fs.Parse(args[1:]); err != nil {
			return fmt.Errorf("%v: %w", err, errUsage)
		}
		if fs.NArg() > 0 {
			return fmt.Errorf("token create takes only flags, got %q: %w", fs.Args(), errUsage)
		}
		if *tenant == "" || !auth.Role(*role).Valid() {
			return fmt.Errorf("token create needs --tenant and --role agent|approver|operator|metrics: %w", errUsage)
		}
		scoped := false
		fs.Visit(func(f *flag.Flag) { scoped = scoped || f.Name == "scope" })
		if scoped {
			// Given, it must be a scope: an empty or invisible one would
			// silently make a token of the whole tenant, or one nobody can
			// tell apart from another.
			if err := auth.CheckScope(*scope); err != nil {
				return fmt.Errorf("--scope: %v: %w", err, errUsage)
			}
		}
		tokens, stop, err := openTokens(ctx, e, logger)
		if err != nil {
			return err
		}
		defer stop()
		var created auth.Created
		if scoped {
			created, err = tokens.CreateScoped(ctx, *tenant, auth.Role(*role), *name, *scope)
		} else {
			created, err = tokens.Create(ctx, *tenant, auth.Role(*role), *name)
		}
		if errors.Is(err, auth.ErrNameTaken) {
			// Names are unique across tenants, so that revoking by name is
			// never ambiguous: say so, and how to get on.
			return fmt.Errorf("a token named %q already exists; choose another --name", *name)
		}
		if err != nil {
			return err
		}
		logger.Info("token created", "name", created.Name, "tenant", *tenant, "role", *role, "scope", *scope)
		fmt.Fprintln(stdout, created.Secret)
		return nil
	case "revoke":
		if len(args) != 2 {
			return fmt.Errorf("token revoke takes one NAME or ID: %w", errUsage)
		}
		tokens, stop, err := openTokens(ctx, e, logger)
		if err != nil {
			return err
		}
		defer stop()
		held, err := tokens.Revoke(ctx, args[1], "cli:token-revoke")
		if err != nil {
			return fmt.Errorf("revoke %s: %w", args[1], err)
		}
		fmt.Fprintf(stdout, "revoked %s; %d unsent operation(s) held\n", args[1], len(held))
		return nil
	default:
		return fmt.Errorf("unknown token command %q: %w", args[0], errUsage)
	}
}

// openTokens opens the database and its token store, for the commands
// that create, revoke or end what authenticates people and agents.
func openTokens(ctx context.Context, e env, logger *slog.Logger) (*auth.Tokens, func(), error) {
	pool, stop, err := openDatabase(ctx, e, logger)
	if err != nil {
		return nil, nil, err
	}
	tokens, err := auth.New(pool, ledger.New(pool, ledger.Config{}), auth.Config{})
	if err != nil {
		stop()
		return nil, nil, err
	}
	return tokens, stop, nil
}
