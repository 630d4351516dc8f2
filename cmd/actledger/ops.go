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
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/actledger/actledger/api"
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
			// A resume removes every pause within its scope and is
			// harmless when nothing was paused.
			fmt.Fprintf(stdout, "resumed: %d pause(s) removed, %d operation(s) released\n", status.Removed, status.Released)
		}
		return status.print(stdout)
	case "dispatch":
		var status dispatchState
		err := getPages(ctx, c, "/v1/dispatch", func(page dispatchState) {
			status.Paused = page.Paused
			status.InFlight = append(status.InFlight, page.InFlight...)
		})
		if err != nil {
			return err
		}
		return status.print(stdout)
	case "list":
		return opsList(ctx, c, stdout)
	case "show":
		if len(args) != 2 {
			return fmt.Errorf("ops show ID: %w", errUsage)
		}
		return opsShow(ctx, c, args[1], stdout)
	case "resolve":
		return opsResolve(ctx, c, args[1:], stdout)
	case "retry":
		fs := newFlagSet("ops retry", io.Discard)
		note := fs.String("note", "", "why it is safe to send again")
		if len(args) < 2 {
			return fmt.Errorf("ops retry ID [--note N]: %w", errUsage)
		}
		if err := fs.Parse(args[2:]); err != nil {
			return fmt.Errorf("%v: %w", err, errUsage)
		}
		var op map[string]any
		if err := c.call(ctx, "POST", "/v1/operations/"+args[1]+"/retry", map[string]string{"note": *note}, &op); err != nil {
			return err
		}
		fmt.Fprintf(stdout, "%s is %s again; it will be sent with the same external key %s\n", op["id"], op["status"], op["external_key"])
		return nil
	case "replay":
		return opsReplay(ctx, c, args[1:], stdout)
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
	Removed  int `json:"removed"`
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

// reviewItem is one entry of GET /v1/review as the CLI shows it.
type reviewItem struct {
	OperationID         *string        `json:"operation_id"`
	EvidenceID          *int64         `json:"evidence_id"`
	Action              string         `json:"action"`
	Key                 string         `json:"key"`
	Provider            string         `json:"provider"`
	Reason              string         `json:"reason"`
	Owner               string         `json:"owner"`
	Deadline            *time.Time     `json:"deadline"`
	AgeSeconds          float64        `json:"age_seconds"`
	Attempts            int            `json:"attempts"`
	RetryAllowed        bool           `json:"retry_allowed"`
	LookupReliableAfter *time.Time     `json:"lookup_reliable_after"`
	Facts               map[string]any `json:"facts"`
	LastProviderAnswer  map[string]any `json:"last_provider_answer"`
}

// reviewPage is one page of GET /v1/review.
type reviewPage struct {
	Items []reviewItem `json:"items"`
}

// getPages GETs every page of the list at path (the largest pages the API
// serves), following next_cursor, and hands each page to add.
func getPages[T any](ctx context.Context, c *opsClient, path string, add func(page T)) error {
	cursor := ""
	for {
		u := path + "?limit=" + strconv.Itoa(api.MaxPageLimit)
		if cursor != "" {
			u += "&cursor=" + url.QueryEscape(cursor)
		}
		var raw json.RawMessage
		if err := c.call(ctx, "GET", u, nil, &raw); err != nil {
			return err
		}
		var page T
		var next struct {
			NextCursor string `json:"next_cursor"`
		}
		if err := json.Unmarshal(raw, &page); err != nil {
			return fmt.Errorf("GET %s: %w", path, err)
		}
		if err := json.Unmarshal(raw, &next); err != nil {
			return fmt.Errorf("GET %s: %w", path, err)
		}
		add(page)
		if next.NextCursor == "" {
			return nil
		}
		cursor = next.NextCursor
	}
}

// opsList prints what is stuck: every open review item, oldest first.
func opsList(ctx context.Context, c *opsClient, w io.Writer) error {
	var out reviewPage
	err := getPages(ctx, c, "/v1/review", func(page reviewPage) { out.Items = append(out.Items, page.Items...) })
	if err != nil {
		return err
	}
	if len(out.Items) == 0 {
		fmt.Fprintln(w, "nothing waits for a person")
		return nil
	}
	fmt.Fprintf(w, "%-38s %-22s %-16s %-8s %-12s %s\n", "ID", "REASON", "KEY", "AGE", "OWNER", "RETRY")
	for _, it := range out.Items {
		id := "evidence/" + fmt.Sprint(deref(it.EvidenceID))
		if it.OperationID != nil {
			id = *it.OperationID
		}
		retry := "no"
		if it.RetryAllowed {
			retry = "allowed"
		}
		fmt.Fprintf(w, "%-38s %-22s %-16s %-8s %-12s %s\n", id, it.Reason, it.Key,
			(time.Duration(it.AgeSeconds) * time.Second).String(), it.Owner, retry)
	}
	return nil
}

func deref[T any](p *T) T {
	var zero T
	if p == nil {
		return zero
	}
	return *p
}

// opsShow prints one operation, its review facts if any, and its history.
func opsShow(ctx context.Context, c *opsClient, id string, w io.Writer) error {
	var op map[string]any
	if err := c.call(ctx, "GET", "/v1/operations/"+id, nil, &op); err != nil {
		return err
	}
	type eventsPage struct {
		Events []struct {
			Seq    int64           `json:"seq"`
			At     string          `json:"at"`
			Kind   string          `json:"kind"`
			From   *string         `json:"from"`
			To     string          `json:"to"`
			Actor  string          `json:"actor"`
			Detail json.RawMessage `json:"detail"`
		} `json:"events"`
	}
	var events eventsPage
	err := getPages(ctx, c, "/v1/operations/"+url.PathEscape(id)+"/events", func(page eventsPage) {
		events.Events = append(events.Events, page.Events...)
	})
	if err != nil {
		return err
	}
	for _, k := range []string{"id", "action", "key", "status", "provider", "external_key", "provider_reference", "attempts", "approval_id", "created_at", "updated_at"} {
		fmt.Fprintf(w, "%-19s %v\n", k+":", op[k])
	}
	fmt.Fprintf(w, "%-19s %s\n", "params:", mustJSON(op["params"]))
	if r, ok := op["review"].(map[string]any); ok {
		fmt.Fprintf(w, "%-19s %v (owner %v, deadline %v)\n", "review:", r["reason"], r["owner"], r["deadline"])
		var review reviewPage
		err := getPages(ctx, c, "/v1/review", func(page reviewPage) { review.Items = append(review.Items, page.Items...) })
		if err == nil {
			for _, it := range review.Items {
				if it.OperationID != nil && *it.OperationID == id {
					fmt.Fprintf(w, "%-19s %v\n", "retry allowed:", it.RetryAllowed)
					if it.LookupReliableAfter != nil {
						fmt.Fprintf(w, "%-19s %s\n", "lookup reliable:", it.LookupReliableAfter.Format(time.RFC3339))
					}
					fmt.Fprintf(w, "%-19s %s\n", "facts:", mustJSON(it.Facts))
					fmt.Fprintf(w, "%-19s %s\n", "last answer:", mustJSON(it.LastProviderAnswer))
				}
			}
		}
	}
	fmt.Fprintf(w, "%-19s %v\n\nhistory:\n", "summary:", op["summary"])
	for _, e := range events.Events {
		from := "·"
		if e.From != nil {
			from = *e.From
		}
		fmt.Fprintf(w, "  %3d %s %-24s %-12s → %-12s %s\n      %s\n", e.Seq, e.At, e.Kind, from, e.To, e.Actor, e.Detail)
	}
	return nil
}

func mustJSON(v any) string {
	raw, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	return string(raw)
}

// opsResolve is `ops resolve ID --outcome succeeded|failed|cancelled
// [--reference R] --note N`, or `ops resolve evidence/N --note N` for
// unmatched evidence.
func opsResolve(ctx context.Context, c *opsClient, args []string, w io.Writer) error {
	if len(args) < 1 {
		return fmt.Errorf("ops resolve ID --outcome succeeded|failed|cancelled [--reference R] --note N: %w", errUsage)
	}
	fs := newFlagSet("ops resolve", io.Discard)
	outcome := fs.String("outcome", "", "succeeded, failed (confirmed no effect) or cancelled")
	reference := fs.String("reference", "", "the provider's reference (required for succeeded)")
	note := fs.String("note", "", "what you checked; it is kept in the history")
	if err := fs.Parse(args[1:]); err != nil {
		return fmt.Errorf("%v: %w", err, errUsage)
	}
	if *note == "" {
		return fmt.Errorf("ops resolve needs --note: say what you checked: %w", errUsage)
	}
	if n, ok := strings.CutPrefix(args[0], "evidence/"); ok {
		if err := c.call(ctx, "POST", "/v1/review/evidence/"+n+"/resolve", map[string]string{"note": *note}, nil); err != nil {
			return err
		}
		fmt.Fprintf(w, "evidence %s resolved\n", n)
		return nil
	}
	// The answer is the operation itself, plus the linked compensation
	// operation when the resolution created one.
	var op map[string]any
	body := map[string]string{"outcome": *outcome, "provider_reference": *reference, "note": *note}
	if err := c.call(ctx, "POST", "/v1/operations/"+args[0]+"/resolve", body, &op); err != nil {
		return err
	}
	fmt.Fprintf(w, "%s is %s\n", op["id"], op["status"])
	if comp, ok := op["compensation"].(map[string]any); ok {
		fmt.Fprintf(w, "compensation %s (%s) is %s\n", comp["id"], comp["action"], comp["status"])
	}
	return nil
}

// opsReplay is `ops replay [--since D] [--reason R] [--dry-run]`: it
// prints each item as the server settles it, then the totals.
func opsReplay(ctx context.Context, c *opsClient, args []string, w io.Writer) error {
	fs := newFlagSet("ops replay", io.Discard)
	since := fs.String("since", "", "only items announced since then: RFC 3339 time or a duration such as 24h")
	reason := fs.String("reason", "", "only items of this review reason")
	dryRun := fs.Bool("dry-run", false, "show what would change, change nothing")
	if err := fs.Parse(args); err != nil || fs.NArg() > 0 {
		return fmt.Errorf("ops replay [--since D] [--reason R] [--dry-run]: %w", errUsage)
	}
	raw, err := json.Marshal(map[string]any{"since": *since, "reason": *reason, "dry_run": *dryRun})
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, "POST", c.base+"/v1/review/replay", bytes.NewReader(raw))
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+c.token)
	res, err := (&http.Client{}).Do(req) // no overall timeout: a long replay streams progress
	if err != nil {
		return fmt.Errorf("actledger at %s: %w", c.base, err)
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		body, _ := io.ReadAll(io.LimitReader(res.Body, 4096))
		return fmt.Errorf("replay: %d %s", res.StatusCode, body)
	}
	if *dryRun {
		fmt.Fprintln(w, "dry run: nothing will be changed")
	}
	dec := json.NewDecoder(res.Body)
	n := 0
	for {
		var line struct {
			Item *struct {
				OperationID *string `json:"operation_id"`
				EvidenceID  *int64  `json:"evidence_id"`
				Key         string  `json:"key"`
				Reason      string  `json:"reason"`
				Result      string  `json:"result"`
				Changed     bool    `json:"changed"`
				Detail      string  `json:"detail"`
			} `json:"item"`
			Summary *struct {
				Read, Items, Open, Changed, Unchanged int
			} `json:"summary"`
			Error *struct{ Code, Message string } `json:"error"`
		}
		if err := dec.Decode(&line); err == io.EOF {
			return errors.New("replay: the server closed the stream before the summary")
		} else if err != nil {
			return fmt.Errorf("replay: %w", err)
		}
		switch {
		case line.Item != nil:
			n++
			mark := " "
			if line.Item.Changed {
				mark = "*"
			}
			fmt.Fprintf(w, "[%d] %s %-16s %-22s %s %s\n", n, mark, line.Item.Key, line.Item.Reason, line.Item.Result, line.Item.Detail)
		case line.Summary != nil:
			s := line.Summary
			fmt.Fprintf(w, "replayed %d review message(s): %d item(s), %d open, %d changed, %d unchanged\n", s.Read, s.Items, s.Open, s.Changed, s.Unchanged)
			return nil
		case line.Error != nil:
			return fmt.Errorf("replay: %s: %s", line.Error.Code, line.Error.Message)
		}
	}
}
