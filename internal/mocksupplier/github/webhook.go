package github

import (
	"encoding/json"
	"net/http"
	"time"

	"github.com/google/uuid"

	"github.com/actledger/actledger/internal/mocksupplier/traffic"
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
func (s *Server) Deliveries() []Delivery { return s.hooks.Deliveries() }

// scheduleWebhookLocked starts the delivery of is's "opened" event, if webhooks are on (and the
// Server is not closed). The body is rendered now, so it shows the issue as created. Each attempt
// gets an X-GitHub-Delivery GUID of its own. s.mu must be held.
func (s *Server) scheduleWebhookLocked(repo *repository, is *Issue) {
	if s.webhook == nil {
		return
	}
	wh := *s.webhook
	body, err := json.Marshal(issuesEvent{
		Action: "opened", Issue: s.viewLocked(is), Repository: s.repositoryView(repo), Sender: s.userView(s.login),
	})
	if err != nil {
		panic("github: encoding an issues event: " + err.Error())
	}
	full, number := repo.fullName(), is.Number
	s.hooks.Send(traffic.Webhook[Delivery]{
		URL:  wh.URL,
		Body: body,
		Headers: func(_ int, h http.Header) {
			h.Set("User-Agent", "GitHub-Hookshot/fake")
			h.Set("X-GitHub-Event", "issues")
			h.Set("X-GitHub-Delivery", uuid.NewString())
			if wh.Secret != "" {
				sign(h, wh.Secret, body)
			}
		},
		Delay:    wh.Delay,
		Attempts: wh.Attempts,
		Backoff:  webhookBackoff,
		Delivery: func(a traffic.Attempt) Delivery {
			return Delivery{
				GUID: a.Header.Get("X-GitHub-Delivery"), Event: "issues", Action: "opened", Repository: full,
				IssueNumber: number, URL: a.URL, Attempt: a.Number, Header: a.Header, Body: a.Body,
				Status: a.Status, Err: a.Err, At: a.At,
			}
		},
		LogAttrs: func(a traffic.Attempt) []any {
			return []any{"delivery", a.Header.Get("X-GitHub-Delivery"), "repository", full, "number", number}
		},
	})
}
