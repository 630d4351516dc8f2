package main

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/google/uuid"

	"github.com/actledger/actledger/internal/display"
	"github.com/actledger/actledger/notify"
	"github.com/actledger/actledger/provider"
)

// notificationsCmd is `actledger notifications test RECEIVER [--providers
// FILE]`: it sends one signed test event to a receiver of the providers
// file, as the notification worker would (its secret, its timeout, no
// redirects followed), and prints what the receiver answered: the first
// thing a person setting up a relay needs. It opens no database.
func notificationsCmd(ctx context.Context, e env, args []string, stdout io.Writer) error {
	if len(args) == 0 || args[0] != "test" {
		return fmt.Errorf("notifications needs the command test: %w", errUsage)
	}
	fs := newFlagSet("notifications test", io.Discard)
	providersFlag := fs.String("providers", e.ProvidersFile, "providers config file; default $PROVIDERS_FILE")
	names, err := parseInterspersed(fs, args[1:])
	if err != nil {
		return err
	}
	if len(names) != 1 {
		return fmt.Errorf("notifications test takes one RECEIVER, got %q: %w", names, errUsage)
	}
	if *providersFlag == "" {
		return fmt.Errorf("notifications test: set PROVIDERS_FILE or --providers: %w", errUsage)
	}
	registry, err := provider.LoadEnv(*providersFlag, e.Getenv)
	if err != nil {
		return err
	}
	r, ok := registry.Notification(names[0])
	if !ok {
		var known []string
		for _, n := range registry.Notifications() {
			known = append(known, n.Name)
		}
		return fmt.Errorf("no receiver %q under notifications in %s (receivers: %q)", names[0], *providersFlag, known)
	}
	timeout := cmp.Or(e.NotifyTimeout, notify.DefaultTimeout)
	now := time.Now()
	id := "test_" + uuid.NewString()
	answer, err := notify.Send(ctx, notify.NewClient(timeout), r, id, now, notify.TestBody(r.Name, now, e.consoleURL()))
	if answer.Status == 0 {
		return fmt.Errorf("receiver %s (%s) did not answer: %w", r.Name, r.URL, err)
	}
	fmt.Fprintf(stdout, "receiver %s (%s) answered %d %s to test event %s\n", r.Name, r.URL, answer.Status, http.StatusText(answer.Status), id)
	if len(answer.Body) > 0 {
		// The receiver's words, shown on a terminal: nothing in them may
		// move the cursor, clear the screen or hide text.
		fmt.Fprintf(stdout, "%s\n", display.Block(string(answer.Body)))
	}
	switch {
	case err != nil:
		return fmt.Errorf("receiver %s: %w", r.Name, err)
	case !answer.OK():
		return fmt.Errorf("receiver %s refused the test event (%d): events it refuses are retried for %s, then given up", r.Name, answer.Status, cmp.Or(e.NotifyRetryFor, notify.DefaultRetryFor))
	}
	return nil
}
