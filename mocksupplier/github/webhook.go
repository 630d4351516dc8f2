package github

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"time"

	"github.com/google/uuid"
)

// webhookBackoff is the wait before the second attempt of a delivery; it doubles after each.
const webhookBackoff = 100 * time.Millisecond

// WebhookConfig says where and how "issues" events are sent.
type WebhookConfig struct {
	// URL receives the POST requests, e.g. actledger's /v1/webhooks/github.
	URL string
	// Secret keys the X-Hub-Signature-256 (and X-Hub-Signature) HMAC. Empty sends no signature
	// headers, as GitHub does for a webhook without a secret.
	Secret string
	// Delay is how long after the issue's creation the first attempt is made, so tests can have
	// the event arrive before, during or after a lookup.
	Delay time.Duration
	// Attempts is how many times an event is sent until the receiver answers 2xx. GitHub itself
	// never redelivers a failed delivery (redelivery is manual, or a script of the user's), so 0
	// means 1; more models such a redelivery script.
	Attempts int
}

// Delivery is one attempt to deliver an event, recorded with what was sent and what the receiver
// answered.
type Delivery struct {
	// GUID is the attempt's X-GitHub-Delivery. GitHub's documentation does not say whether a
	// redelivery keeps the GUID; the fake gives each attempt a new one, the harder case for a
	// receiver that would deduplicate by it (the header is not covered by the signature either).
	GUID        string
	Event       string // X-GitHub-Event: "issues"
	Action      string // "opened"
	Repository  string
	IssueNumber int
	URL         string
	// Attempt counts from 1 for each event.
	Attempt int
	// Header and Body are the request as sent.
	Header http.Header
	Body   []byte
	// Status is the receiver's HTTP status, 0 when it gave none (Err says why).
	Status int
	Err    string
	At     time.Time
}

// issuesEvent is the body of an "issues" delivery
// (https://docs.github.com/webhooks/webhook-events-and-payloads#issues).
type issuesEvent struct {
	Action     string         `json:"action"`
	Issue      issueView      `json:"issue"`
	Repository repositoryView `json:"repository"`
	Sender     userView       `json:"sender"`
}

// SetWebhook sets where events go for issues created from now on; nil turns webhooks off.
// Deliveries already scheduled keep the settings they were scheduled with.
func (s *Server) SetWebhook(wh *WebhookConfig) {
	if wh != nil {
		c := *wh
		wh = &c
	}
	s.mu.Lock()
	s.webhook = wh
	s.mu.Unlock()
}

// Deliveries returns every delivery attempt so far, oldest first.
func (s *Server) Deliveries() []Delivery {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]Delivery, len(s.deliveries))
	for i, d := range s.deliveries {
		d.Header = d.Header.Clone()
		d.Body = bytes.Clone(d.Body)
		out[i] = d
	}
	return out
}

// scheduleWebhookLocked starts the delivery of is's "opened" event, if webhooks are on. The body
// is rendered now, so it shows the issue as created. s.mu must be held.
func (s *Server) scheduleWebhookLocked(repo *repository, is *Issue) {
	if s.webhook == nil || s.closed {
		return
	}
	wh := *s.webhook
	body, err := json.Marshal(issuesEvent{
		Action: "opened", Issue: s.viewLocked(is), Repository: s.repositoryView(repo), Sender: s.userView(s.login),
	})
	if err != nil {
		panic("github: encoding an issues event: " + err.Error())
	}
	stop := s.stop
	s.hooks.Add(1)
	go func() {
		defer s.hooks.Done()
		s.deliver(wh, repo.fullName(), is.Number, body, stop)
	}()
}

// deliver sends one event after the configured delay, retrying a non-2xx answer with a doubling
// backoff, until it is acknowledged, the attempts run out, or stop is closed.
func (s *Server) deliver(wh WebhookConfig, repo string, number int, body []byte, stop <-chan struct{}) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		select {
		case <-stop:
			cancel()
		case <-ctx.Done():
		}
	}()
	attempts := max(wh.Attempts, 1)
	wait := wh.Delay
	for attempt := 1; attempt <= attempts; attempt++ {
		if !sleep(ctx, wait) {
			return
		}
		wait = webhookBackoff << (attempt - 1)
		d := Delivery{
			GUID: uuid.NewString(), Event: "issues", Action: "opened", Repository: repo, IssueNumber: number,
			URL: wh.URL, Attempt: attempt, Body: body,
		}
		d.Header, d.Status, d.Err = s.post(ctx, wh, d.GUID, body)
		if ctx.Err() != nil {
			return
		}
		d.At = s.now().UTC()
		s.mu.Lock()
		s.deliveries = append(s.deliveries, d)
		s.mu.Unlock()
		if d.Err == "" && d.Status >= 200 && d.Status < 300 {
			return
		}
		s.log.WarnContext(ctx, "webhook not acknowledged",
			"delivery", d.GUID, "repository", repo, "number", number, "attempt", attempt, "status", d.Status, "error", d.Err)
	}
}

// post sends one attempt as GitHub does and returns the headers it sent and the receiver's
// status.
func (s *Server) post(ctx context.Context, wh WebhookConfig, guid string, body []byte) (http.Header, int, string) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, wh.URL, bytes.NewReader(body))
	if err != nil {
		return nil, 0, err.Error()
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "GitHub-Hookshot/fake")
	req.Header.Set("X-GitHub-Event", "issues")
	req.Header.Set("X-GitHub-Delivery", guid)
	if wh.Secret != "" {
		req.Header.Set("X-Hub-Signature", signature1(wh.Secret, body))
		req.Header.Set("X-Hub-Signature-256", signature256(wh.Secret, body))
	}
	sent := req.Header.Clone()
	resp, err := s.client.Do(req)
	if err != nil {
		return sent, 0, err.Error()
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, maxBody))
	return sent, resp.StatusCode, ""
}

// sleep waits d, reporting false if ctx ended first.
func sleep(ctx context.Context, d time.Duration) bool {
	if d <= 0 {
		return ctx.Err() == nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}
