package stripe

import (
	"cmp"
	"encoding/json"
	"errors"
	"net/http"
	"slices"
	"time"

	"github.com/actledger/actledger/internal/mocksupplier/traffic"
)

// Webhook delivery defaults.
const (
	// DefaultAttempts is how many times an event is sent to an endpoint that does not answer
	// 2xx: the first attempt and three retries, as Stripe retries sandbox events three times
	// (over a few hours; the fake retries within a second).
	DefaultAttempts = 4
	// DefaultBackoff is the wait before the first retry; it doubles for each further one.
	DefaultBackoff = 100 * time.Millisecond
)

// WebhookEndpoint is one endpoint events are sent to, as registered at Stripe.
type WebhookEndpoint struct {
	// URL receives POST requests, e.g. actledger's /v1/webhooks/{provider}.
	URL string
	// Secret is the endpoint's signing secret (whsec_…), the HMAC key of Stripe-Signature.
	Secret string
	// EnabledEvents lists the event types the endpoint receives; empty, or "*", means all.
	EnabledEvents []string
	// Delay is how long after the event the first attempt is made, so a test can have the
	// webhook arrive before, during or after a lookup.
	Delay time.Duration
	// Attempts is how many times the event is sent in all while the endpoint does not answer
	// 2xx; 0 means DefaultAttempts.
	Attempts int
	// Backoff is the wait before the first retry, doubling after; 0 means DefaultBackoff. Each
	// attempt is signed afresh with a new timestamp, as Stripe signs each delivery attempt.
	Backoff time.Duration
	// TestModeV0 adds a v0 signature under a random secret after the v1 one, as Stripe's
	// documentation has shown for test-mode events, to check that a verifier ignores schemes
	// other than v1.
	TestModeV0 bool
}

func (ep WebhookEndpoint) validate() error {
	switch {
	case ep.URL == "":
		return errors.New("webhook URL is empty")
	case ep.Secret == "":
		return errors.New("webhook signing secret is empty")
	case ep.Delay < 0 || ep.Backoff < 0 || ep.Attempts < 0:
		return errors.New("webhook delay, backoff and attempts must not be negative")
	}
	return nil
}

func (ep WebhookEndpoint) wants(eventType string) bool {
	return len(ep.EnabledEvents) == 0 || slices.Contains(ep.EnabledEvents, "*") ||
		slices.Contains(ep.EnabledEvents, eventType)
}

func cloneEndpoints(eps []WebhookEndpoint) []WebhookEndpoint {
	out := slices.Clone(eps)
	for i := range out {
		out[i].EnabledEvents = slices.Clone(out[i].EnabledEvents)
	}
	return out
}

// Event is Stripe's event object, as it is delivered.
type Event struct {
	ID              string       `json:"id"`
	Object          string       `json:"object"`
	APIVersion      string       `json:"api_version"`
	Created         int64        `json:"created"`
	Data            EventData    `json:"data"`
	Livemode        bool         `json:"livemode"`
	PendingWebhooks int          `json:"pending_webhooks"`
	Request         EventRequest `json:"request"`
	// Type is payment_intent.created, payment_intent.succeeded,
	// payment_intent.payment_failed, payment_intent.amount_capturable_updated,
	// refund.created or charge.refunded.
	Type string `json:"type"`
}

// EventData holds the object the event is about, as it was when the event happened.
type EventData struct {
	Object json.RawMessage `json:"object"`
}

// EventRequest names the API request that caused the event.
type EventRequest struct {
	ID             *string `json:"id"`
	IdempotencyKey *string `json:"idempotency_key"`
}

// Delivery is one attempt to deliver an event to an endpoint.
type Delivery struct {
	EventID string
	Type    string
	URL     string
	// Attempt counts from 1 for each event and endpoint.
	Attempt int
	// Status is the receiver's HTTP status, 0 when it gave none (Err says why).
	Status int
	Err    string
	At     time.Time
	// Header and Body are the request as sent, Stripe-Signature included.
	Header http.Header
	Body   []byte
}

func (s *Server) newEvent(typ, key string, object any) Event {
	reqID := newID("req_")
	ev := Event{
		ID:         newID("evt_"),
		Object:     "event",
		APIVersion: APIVersion,
		Created:    s.now().Unix(),
		Data:       EventData{Object: mustJSON(object)},
		Livemode:   s.livemode,
		Request:    EventRequest{ID: &reqID},
		Type:       typ,
	}
	if key != "" {
		ev.Request.IdempotencyKey = &key
	}
	return ev
}

// SetWebhooks replaces the webhook endpoints for events from now on; none turns webhooks off.
// Deliveries already scheduled keep the endpoint they were scheduled for. It panics on an
// invalid endpoint.
func (s *Server) SetWebhooks(endpoints ...WebhookEndpoint) {
	for _, ep := range endpoints {
		if err := ep.validate(); err != nil {
			panic("stripe: SetWebhooks: " + err.Error())
		}
	}
	s.mu.Lock()
	s.endpoints = cloneEndpoints(endpoints)
	s.mu.Unlock()
}

// Events returns every event created so far, oldest first, whether or not it was delivered.
func (s *Server) Events() []Event {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.events)
}

// Deliveries returns every delivery attempt so far, oldest first.
func (s *Server) Deliveries() []Delivery { return s.hooks.Deliveries() }

// scheduleLocked records events and starts their deliveries to the endpoints that want them,
// unless the Server is closed. Each attempt is signed afresh with a new timestamp, as Stripe
// signs each delivery attempt. s.mu must be held.
func (s *Server) scheduleLocked(events []Event) {
	for _, ev := range events {
		var targets []WebhookEndpoint
		for _, ep := range s.endpoints {
			if ep.wants(ev.Type) {
				targets = append(targets, ep)
			}
		}
		ev.PendingWebhooks = len(targets)
		s.events = append(s.events, ev)
		body := mustJSON(ev)
		for _, ep := range targets {
			v0 := ""
			if ep.TestModeV0 {
				v0 = newID("v0_")
			}
			s.hooks.Send(traffic.Webhook[Delivery]{
				URL:  ep.URL,
				Body: body,
				Headers: func(_ int, h http.Header) {
					h.Set(SignatureHeader, signature(ep.Secret, s.now(), body, v0))
				},
				Delay:    ep.Delay,
				Attempts: cmp.Or(ep.Attempts, DefaultAttempts),
				Backoff:  cmp.Or(ep.Backoff, DefaultBackoff),
				Delivery: func(a traffic.Attempt) Delivery {
					return Delivery{
						EventID: ev.ID, Type: ev.Type, URL: a.URL, Attempt: a.Number, Status: a.Status,
						Err: a.Err, At: a.At, Header: a.Header, Body: a.Body,
					}
				},
				LogAttrs: func(traffic.Attempt) []any { return []any{"event_id", ev.ID, "type", ev.Type} },
			})
		}
	}
}
