package zendesk

import (
	"cmp"
	"crypto/rand"
	"errors"
	"net/http"
	"strconv"
	"time"

	"github.com/actledger/actledger/internal/mocksupplier/traffic"
)

// Webhook delivery defaults.
const (
	// DefaultAttempts is how many times an event is sent while the receiver does not answer 2xx.
	DefaultAttempts = 4
	// DefaultBackoff is the wait before the first retry; it doubles for each further one.
	DefaultBackoff = 100 * time.Millisecond
	// EventVersion is the zendesk_event_version of the ticket events the fake sends.
	EventVersion = "2022-11-06"
)

// Webhook says where and how ticket.created events are sent: a Zendesk webhook subscribed to
// the ticket created event.
type Webhook struct {
	// URL receives POST requests.
	URL string
	// Secret is the webhook's signing secret, the HMAC key of X-Zendesk-Webhook-Signature.
	Secret string
	// ID is the webhook's id, sent as X-Zendesk-Webhook-Id; empty means a generated one.
	ID string
	// Delay is how long after the ticket's creation the first attempt is made.
	Delay time.Duration
	// Attempts is how many times the event is sent in all while the receiver does not answer
	// 2xx; 0 means DefaultAttempts.
	Attempts int
	// Backoff is the wait before the first retry, doubling after; 0 means DefaultBackoff.
	Backoff time.Duration
}

func (wh Webhook) validate() error {
	switch {
	case wh.URL == "":
		return errors.New("webhook URL is empty")
	case wh.Secret == "":
		return errors.New("webhook signing secret is empty")
	case wh.Delay < 0 || wh.Backoff < 0 || wh.Attempts < 0:
		return errors.New("webhook delay, backoff and attempts must not be negative")
	}
	return nil
}

func cloneWebhook(wh *Webhook) *Webhook {
	if wh == nil {
		return nil
	}
	c := *wh
	if c.ID == "" {
		c.ID = rand.Text()
	}
	return &c
}

// SetWebhook sets where ticket.created events go for tickets created from now on; nil turns
// webhooks off. It panics on an invalid webhook.
func (s *Server) SetWebhook(wh *Webhook) {
	if wh != nil {
		if err := wh.validate(); err != nil {
			panic("zendesk: SetWebhook: " + err.Error())
		}
	}
	s.mu.Lock()
	s.webhook = cloneWebhook(wh)
	s.mu.Unlock()
}

// Event is a Zendesk webhook event (the schema shared by event-subscribed webhooks): for the
// fake, always zen:event-type:ticket.created.
type Event struct {
	Type                string      `json:"type"`
	AccountID           int64       `json:"account_id"`
	ID                  string      `json:"id"`
	Time                string      `json:"time"`
	ZendeskEventVersion string      `json:"zendesk_event_version"`
	Subject             string      `json:"subject"`
	Detail              EventDetail `json:"detail"`
	Event               struct{}    `json:"event"`
}

// EventDetail is the ticket as a ticket event carries it: ids and external_id as strings.
type EventDetail struct {
	ActorID     string   `json:"actor_id"`
	AssigneeID  *string  `json:"assignee_id"`
	CreatedAt   string   `json:"created_at"`
	Description string   `json:"description"`
	ExternalID  *string  `json:"external_id"`
	ID          string   `json:"id"`
	Priority    *string  `json:"priority"`
	RequesterID string   `json:"requester_id"`
	Status      string   `json:"status"`
	Subject     *string  `json:"subject"`
	SubmitterID string   `json:"submitter_id"`
	Tags        []string `json:"tags"`
	Type        *string  `json:"type"`
	UpdatedAt   string   `json:"updated_at"`
	Via         via      `json:"via"`
}

// Delivery is one attempt to deliver an event.
type Delivery struct {
	EventID  string
	TicketID int64
	URL      string
	// Attempt counts from 1 for each event.
	Attempt int
	// Status is the receiver's HTTP status, 0 when it gave none (Err says why).
	Status int
	Err    string
	At     time.Time
	// Header and Body are the request as sent, the signature headers included.
	Header http.Header
	Body   []byte
}

// Deliveries returns every delivery attempt so far, oldest first.
func (s *Server) Deliveries() []Delivery { return s.hooks.Deliveries() }

// scheduleLocked starts the delivery of t's ticket.created event, if a webhook is set (and the
// Server is not closed). Each attempt is signed with the time it is sent. s.mu must be held.
func (s *Server) scheduleLocked(t Ticket) {
	if s.webhook == nil {
		return
	}
	wh := *s.webhook
	id := strconv.FormatInt(t.ID, 10)
	ev := Event{
		Type:                "zen:event-type:ticket.created",
		AccountID:           s.accountID,
		ID:                  rand.Text(),
		Time:                t.CreatedAt,
		ZendeskEventVersion: EventVersion,
		Subject:             "zen:ticket:" + id,
		Detail: EventDetail{
			ActorID: strconv.FormatInt(agentID, 10), CreatedAt: t.CreatedAt, Description: t.Description,
			ExternalID: t.ExternalID, ID: id, Priority: t.Priority, RequesterID: strconv.FormatInt(t.RequesterID, 10),
			Status: t.Status, Subject: t.Subject, SubmitterID: strconv.FormatInt(t.SubmitterID, 10), Tags: t.Tags,
			Type: t.Type, UpdatedAt: t.UpdatedAt, Via: t.Via,
		},
	}
	body := mustJSON(ev)
	s.hooks.Send(traffic.Webhook[Delivery]{
		URL:  wh.URL,
		Body: body,
		Headers: func(_ int, h http.Header) {
			ts := s.now().UTC().Format(timeFormat)
			h.Set("X-Zendesk-Webhook-Id", wh.ID)
			h.Set(SignatureTimestampHeader, ts)
			h.Set(SignatureHeader, signature(wh.Secret, ts, body))
		},
		Delay:    wh.Delay,
		Attempts: cmp.Or(wh.Attempts, DefaultAttempts),
		Backoff:  cmp.Or(wh.Backoff, DefaultBackoff),
		Delivery: func(a traffic.Attempt) Delivery {
			return Delivery{
				EventID: ev.ID, TicketID: t.ID, URL: a.URL, Attempt: a.Number, Status: a.Status,
				Err: a.Err, At: a.At, Header: a.Header, Body: a.Body,
			}
		},
		LogAttrs: func(traffic.Attempt) []any { return []any{"event_id", ev.ID, "ticket_id", t.ID} },
	})
}
