package mocksupplier

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"net/http"
	"strconv"
	"time"
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
func (s *Server) Deliveries() []Delivery {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Delivery(nil), s.deliveries...)
}

// scheduleWebhookLocked starts the delivery of o's order.created event, if webhooks are on.
// s.mu must be held.
func (s *Server) scheduleWebhookLocked(o *Order) {
	if s.webhook == nil || s.closed {
		return
	}
	wh := *s.webhook
	gen, stop := s.gen, s.stop
	s.hooks.Add(1)
	go func() {
		defer s.hooks.Done()
		s.deliver(wh, o, gen, stop)
	}()
}

// deliver sends one event, after the configured delay, retrying non-2xx answers with a doubling
// backoff, until it is acknowledged, the attempts run out, or stop is closed.
func (s *Server) deliver(wh WebhookConfig, o *Order, gen uint64, stop <-chan struct{}) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		select {
		case <-stop:
			cancel()
		case <-ctx.Done():
		}
	}()

	ev := event{
		EventID:           newID("evt_"),
		Type:              "order.created",
		Reference:         o.ClientReference,
		ProviderReference: o.ID,
		Status:            "succeeded",
		Data:              o,
	}
	body := mustJSON(ev)
	wait := wh.Delay
	for attempt := 1; attempt <= webhookAttempts; attempt++ {
		if !sleep(ctx, wait) {
			return
		}
		wait = webhookBackoff << (attempt - 1)
		status, err := s.post(ctx, wh, body)
		if ctx.Err() != nil {
			return
		}
		d := Delivery{
			EventID: ev.EventID, Reference: ev.Reference, OrderID: o.ID, URL: wh.URL,
			Attempt: attempt, Status: status, At: s.now().UTC(),
		}
		if err != nil {
			d.Err = err.Error()
		}
		s.mu.Lock()
		if s.gen == gen {
			s.deliveries = append(s.deliveries, d)
		}
		s.mu.Unlock()
		if err == nil && status >= 200 && status < 300 {
			return
		}
		s.log.WarnContext(ctx, "webhook not acknowledged",
			"event_id", ev.EventID, "order_id", o.ID, "attempt", attempt, "status", status, "error", d.Err)
	}
}

// post sends one signed attempt and returns the receiver's status.
func (s *Server) post(ctx context.Context, wh WebhookConfig, body []byte) (int, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, wh.URL, bytes.NewReader(body))
	if err != nil {
		return 0, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Webhook-Signature", signature(wh.Secret, s.now(), body))
	resp, err := s.client.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, maxBody))
	return resp.StatusCode, nil
}

// signature is the Webhook-Signature header value: t=<unix seconds>,v1=<hex HMAC-SHA256 of
// "<t>.<body>">.
func signature(secret string, now time.Time, body []byte) string {
	t := strconv.FormatInt(now.Unix(), 10)
	mac := hmac.New(sha256.New, []byte(secret))
	mac.Write([]byte(t))
	mac.Write([]byte("."))
	mac.Write(body)
	return "t=" + t + ",v1=" + hex.EncodeToString(mac.Sum(nil))
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
