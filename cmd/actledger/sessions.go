package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
)

// sessions is `actledger sessions end`: it ends the console sessions of
// people signed in with the identity provider, which no token revocation
// reaches.
func sessions(ctx context.Context, e env, args []string, stdout io.Writer, logger *slog.Logger) error {
	if len(args) == 0 || args[0] != "end" {
		return fmt.Errorf("sessions needs end: %w", errUsage)
	}
	fs := newFlagSet("sessions end", io.Discard)
	subject := fs.String("subject", "", "the person's subject (the ID token's sub), as the history's person detail shows it")
	issuer := fs.String("issuer", "", "the identity provider's issuer (empty: any)")
	people := fs.Bool("people", false, "end every person's session (tokens' sessions are left alone)")
	if err := fs.Parse(args[1:]); err != nil {
		return fmt.Errorf("%v: %w", err, errUsage)
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("sessions end takes only flags, got %q: %w", fs.Args(), errUsage)
	}
	if (*subject == "") == !*people {
		return fmt.Errorf("sessions end needs --subject S or --people: %w", errUsage)
	}
	tokens, stop, err := openTokens(ctx, e, logger)
	if err != nil {
		return err
	}
	defer stop()
	n, err := tokens.EndPersonSessions(ctx, *issuer, *subject)
	if err != nil {
		return err
	}
	logger.Info("people's console sessions ended", "subject", *subject, "issuer", *issuer, "ended", n)
	fmt.Fprintf(stdout, "ended %d console session(s)\n", n)
	return nil
}
