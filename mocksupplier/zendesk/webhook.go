package zendesk

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"io"
	"net/http"
	"slices"
	"strconv"
	"time"
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
func (s *Server) Deliveries() []Delivery {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := slices.Clone(s.deliveries)
	for i := range out {
		out[i].Header = out[i].Header.Clone()
	}
	return out
}

// scheduleLocked starts the delivery of t's ticket.created event, if a webhook is set. s.mu must
// be held.
func (s *Server) scheduleLocked(t Ticket) {
	if s.webhook == nil || s.closed {
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
	s.hooks.Add(1)
	go func() {
		defer s.hooks.Done()
		s.deliver(wh, ev.ID, t.ID, body)
	}()
}

// deliver sends one event after the delay, retrying answers other than 2xx with a doubling
// backoff, until it is acknowledged, the attempts run out, or Close is called. Each attempt is
// signed with the time it is sent.
func (s *Server) deliver(wh Webhook, eventID string, ticketID int64, body []byte) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		select {
		case <-s.stop:
			cancel()
		case <-ctx.Done():
		}
	}()
	attempts, backoff := wh.Attempts, wh.Backoff
	if attempts == 0 {
		attempts = DefaultAttempts
	}
	if backoff == 0 {
		backoff = DefaultBackoff
	}
	pause := wh.Delay
	for attempt := 1; attempt <= attempts; attempt++ {
		if !sleep(ctx, pause) {
			return
		}
		pause = backoff << (attempt - 1)
		ts := s.now().UTC().Format(timeFormat)
		header := http.Header{}
		header.Set("Content-Type", "application/json")
		header.Set("X-Zendesk-Webhook-Id", wh.ID)
		header.Set(SignatureTimestampHeader, ts)
		header.Set(SignatureHeader, signature(wh.Secret, ts, body))
		status, err := s.post(ctx, wh.URL, header, body)
		if ctx.Err() != nil {
			return
		}
		d := Delivery{
			EventID: eventID, TicketID: ticketID, URL: wh.URL, Attempt: attempt, Status: status,
			At: s.now().UTC(), Header: header, Body: body,
		}
		if err != nil {
			d.Err = err.Error()
		}
		s.mu.Lock()
		s.deliveries = append(s.deliveries, d)
		s.mu.Unlock()
		if err == nil && status >= 200 && status < 300 {
			return
		}
		s.log.WarnContext(ctx, "webhook not acknowledged",
			"event_id", eventID, "ticket_id", ticketID, "attempt", attempt, "status", status, "error", d.Err)
	}
}

func (s *Server) post(ctx context.Context, url string, header http.Header, body []byte) (int, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return 0, err
	}
	req.Header = header.Clone()
	resp, err := s.client.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, maxBody))
	return resp.StatusCode, nil
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
