package mocksupplier

import (
	"net/http"
	"time"

	"github.com/actledger/actledger/internal/mocksupplier/traffic"
	"github.com/actledger/actledger/webhook"
)

// Webhook delivery retries: attempts in all, and the wait before the second one (doubling).
const (
	webhookAttempts = 5
	webhookBackoff  = 100 * time.Millisecond
)

// WebhookConfig says where and how order.created events are sent.
type WebhookConfig struct {
	// URL receives POST requests, e.g. actledger's /v1/webhooks/acme.
	URL string
	// Secret keys the HMAC-SHA256 in the Webhook-Signature header.
	Secret string
	// Delay is how long after the order's creation the first attempt is made, so tests can
	// have the webhook arrive before, during or after a lookup.
	Delay time.Duration
}

// Delivery is one attempt to deliver a webhook, recorded so tests can see what was sent and what
// the receiver answered.
type Delivery struct {
	EventID   string `json:"event_id"`
	Reference string `json:"reference"`
	OrderID   string `json:"order_id"`
	URL       string `json:"url"`
	// Attempt counts from 1 for each event.
	Attempt int `json:"attempt"`
	// Status is the receiver's HTTP status, 0 when it gave none (Err says why).
	Status int       `json:"status"`
	Err    string    `json:"error,omitempty"`
	At     time.Time `json:"at"`
}

// event is the webhook body, in the shape actledger's POST /v1/webhooks/{provider} accepts.
type event struct {
	EventID           string `json:"event_id"`
	Type              string `json:"type"`
	Reference         string `json:"reference"`
	ProviderReference string `json:"provider_reference"`
	Status            string `json:"status"`
	Data              *Order `json:"data"`
}

// Deliveries returns every webhook delivery attempt so far, oldest first.
func (s *Server) Deliveries() []Delivery { return s.hooks.Deliveries() }

// scheduleWebhookLocked starts the delivery of o's order.created event, if webhooks are on (and
// the Server is not closed): sent after the configured delay, retried with a doubling backoff
// while the receiver does not answer 2xx, each attempt signed when it is sent. s.mu must be held.
func (s *Server) scheduleWebhookLocked(o *Order) {
	if s.webhook == nil {
		return
	}
	wh := *s.webhook
	ev := event{
		EventID:           newID("evt_"),
		Type:              "order.created",
		Reference:         o.ClientReference,
		ProviderReference: o.ID,
		Status:            "succeeded",
		Data:              o,
	}
	body := mustJSON(ev)
	s.hooks.Send(traffic.Webhook[Delivery]{
		URL:  wh.URL,
		Body: body,
		Headers: func(_ int, h http.Header) {
			h.Set(webhook.Header, webhook.Sign([]byte(wh.Secret), s.now(), body))
		},
		Delay:    wh.Delay,
		Attempts: webhookAttempts,
		Backoff:  webhookBackoff,
		Delivery: func(a traffic.Attempt) Delivery {
			return Delivery{
				EventID: ev.EventID, Reference: ev.Reference, OrderID: o.ID, URL: a.URL,
				Attempt: a.Number, Status: a.Status, Err: a.Err, At: a.At,
			}
		},
		LogAttrs: func(traffic.Attempt) []any { return []any{"event_id", ev.EventID, "order_id", o.ID} },
	})
}
