package main

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"
)

// opsClient talks to a running actledger's operator API with an operator
// token, so the CLI sees exactly what the token's tenant may see.
type opsClient struct {
	base  string
	token string
	http  *http.Client
}

func newOpsClient(getenv func(string) string) (*opsClient, error) {
	token := getenv("ACTLEDGER_TOKEN")
	if token == "" {
		return nil, errors.New("set ACTLEDGER_TOKEN to an operator token (actledger token create --tenant T --role operator)")
	}
	base := strings.TrimRight(cmp.Or(getenv("ACTLEDGER_URL"), "http://"+cmp.Or(getenv("LISTEN_ADDR"), "127.0.0.1:8080")), "/")
	if !strings.HasPrefix(base, "http://") && !strings.HasPrefix(base, "https://") {
		base = "http://" + base
	}
	return &opsClient{base: base, token: token, http: &http.Client{Timeout: 30 * time.Second}}, nil
}

// call sends a request and decodes the JSON answer into out; API errors
// come back as their code and message.
func (c *opsClient) call(ctx context.Context, method, path string, body any, out any) error {
	var rd io.Reader
	if body != nil {
		raw, err := json.Marshal(body)
		if err != nil {
			return err
		}
		rd = bytes.NewReader(raw)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, rd)
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+c.token)
	req.Header.Set("Content-Type", "application/json")
	res, err := c.http.Do(req)
	if err != nil {
		return fmt.Errorf("actledger at %s: %w", c.base, err)
	}
	defer res.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(res.Body, 16<<20))
	if err != nil {
		return err
	}
	if res.StatusCode >= 300 {
		var e struct {
			Error struct{ Code, Message string } `json:"error"`
		}
		if json.Unmarshal(raw, &e) == nil && e.Error.Code != "" {
			return fmt.Errorf("%s %s: %d %s: %s", method, path, res.StatusCode, e.Error.Code, e.Error.Message)
		}
		return fmt.Errorf("%s %s: %d", method, path, res.StatusCode)
	}
	if out != nil {
		return json.Unmarshal(raw, out)
	}
	return nil
}

// ops is `actledger ops ...`, the operator's commands.
func ops(ctx context.Context, getenv func(string) string, args []string, stdout io.Writer) error {
	if len(args) == 0 {
		return fmt.Errorf("ops needs a command: %w", errUsage)
	}
	c, err := newOpsClient(getenv)
	if err != nil {
		return err
	}
	switch args[0] {
	case "pause", "resume":
		fs := newFlagSet("ops "+args[0], io.Discard)
		providerName := fs.String("provider", "", "only this provider")
		action := fs.String("action", "", "only this action")
		if err := fs.Parse(args[1:]); err != nil || fs.NArg() > 0 {
			return fmt.Errorf("ops %s [--provider P] [--action A]: %w", args[0], errUsage)
		}
		var status dispatchState
		if err := c.call(ctx, "POST", "/v1/dispatch/"+args[0], map[string]string{"provider": *providerName, "action": *action}, &status); err != nil {
			return err
		}
		if args[0] == "resume" {
			fmt.Fprintf(stdout, "resumed; %d queued operation(s) released\n", status.Released)
		}
		return status.print(stdout)
	case "dispatch":
		var status dispatchState
		if err := c.call(ctx, "GET", "/v1/dispatch", nil, &status); err != nil {
			return err
		}
		return status.print(stdout)
	default:
		return fmt.Errorf("unknown ops command %q: %w", args[0], errUsage)
	}
}

// dispatchState is the answer of /v1/dispatch.
type dispatchState struct {
	Paused []struct {
		Provider string `json:"provider"`
		Action   string `json:"action"`
		PausedBy string `json:"paused_by"`
		PausedAt string `json:"paused_at"`
	} `json:"paused"`
	InFlight []struct {
		OperationID string  `json:"operation_id"`
		Action      string  `json:"action"`
		Key         string  `json:"key"`
		Provider    string  `json:"provider"`
		LeaseOwner  string  `json:"lease_owner"`
		AgeSeconds  float64 `json:"age_seconds"`
		Attempts    int     `json:"attempts"`
	} `json:"in_flight"`
	Released int `json:"released"`
}

func (s dispatchState) print(w io.Writer) error {
	if len(s.Paused) == 0 {
		fmt.Fprintln(w, "dispatch: running (no pause)")
	}
	for _, p := range s.Paused {
		fmt.Fprintf(w, "PAUSED provider=%s action=%s by %s at %s\n", cmp.Or(p.Provider, "*"), cmp.Or(p.Action, "*"), p.PausedBy, p.PausedAt)
	}
	fmt.Fprintf(w, "in flight: %d (these may still land at the provider)\n", len(s.InFlight))
	for _, op := range s.InFlight {
		fmt.Fprintf(w, "  %s  %-24s %-16s provider=%s worker=%s age=%.1fs attempts=%d\n",
			op.OperationID, op.Action, op.Key, op.Provider, op.LeaseOwner, op.AgeSeconds, op.Attempts)
	}
	return nil
}
