package mocksupplier

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"time"
)

// The admin API: the knobs and the ground truth of Server, over HTTP, for demos and tests that
// run the supplier out of process. Bodies are strict JSON; unknown fields answer 400.

// configView is the body of POST /admin/config (every field optional) and the answer of both
// config endpoints. The secret is accepted but never echoed.
type configView struct {
	Idempotency Mode  `json:"idempotency"`
	LookupLagMS int64 `json:"lookup_lag_ms"`
	// LookupDelayMS holds every lookup's answer (see Server.SetLookupDelay).
	LookupDelayMS int64        `json:"lookup_delay_ms"`
	Webhook       *webhookView `json:"webhook"`
}

type webhookView struct {
	URL       string `json:"url"`
	Secret    string `json:"secret,omitempty"`
	SecretSet bool   `json:"secret_set"`
	DelayMS   int64  `json:"delay_ms"`
}

func (s *Server) configLocked() configView {
	v := configView{Idempotency: s.mode, LookupLagMS: s.lag.Milliseconds(), LookupDelayMS: s.lookupDelay.Milliseconds()}
	if s.webhook != nil {
		v.Webhook = &webhookView{URL: s.webhook.URL, SecretSet: s.webhook.Secret != "", DelayMS: s.webhook.Delay.Milliseconds()}
	}
	return v
}

// handleGetConfig serves GET /admin/config.
func (s *Server) handleGetConfig(w http.ResponseWriter, _ *http.Request) {
	s.mu.Lock()
	v := s.configLocked()
	s.mu.Unlock()
	writeJSON(w, http.StatusOK, v)
}

// handleSetConfig serves POST /admin/config: a partial update, all fields checked before any is
// applied. "webhook": null turns webhooks off; a missing field leaves its setting alone.
func (s *Server) handleSetConfig(w http.ResponseWriter, r *http.Request) {
	var fields map[string]json.RawMessage
	if !decodeStrict(w, r, &fields) {
		return
	}
	var (
		mode    *Mode
		lag     *time.Duration
		delay   *time.Duration
		webhook **WebhookConfig
	)
	for name, raw := range fields {
		switch name {
		case "idempotency":
			var m Mode
			if err := json.Unmarshal(raw, &m); err != nil {
				writeError(w, http.StatusBadRequest, "bad_config", "idempotency: "+err.Error())
				return
			}
			if m == "" {
				m = Honour
			}
			if err := m.validate(); err != nil {
				writeError(w, http.StatusBadRequest, "bad_config", err.Error())
				return
			}
			mode = &m
		case "lookup_lag_ms":
			var ms int64
			if err := json.Unmarshal(raw, &ms); err != nil || ms < 0 {
				writeError(w, http.StatusBadRequest, "bad_config", "lookup_lag_ms must be a non-negative integer")
				return
			}
			d := time.Duration(ms) * time.Millisecond
			lag = &d
		case "lookup_delay_ms":
			var ms int64
			if err := json.Unmarshal(raw, &ms); err != nil || ms < 0 {
				writeError(w, http.StatusBadRequest, "bad_config", "lookup_delay_ms must be a non-negative integer")
				return
			}
			d := time.Duration(ms) * time.Millisecond
			delay = &d
		case "webhook":
			wh, err := parseWebhook(raw)
			if err != nil {
				writeError(w, http.StatusBadRequest, "bad_config", "webhook: "+err.Error())
				return
			}
			webhook = &wh
		default:
			writeError(w, http.StatusBadRequest, "bad_config", fmt.Sprintf("unknown field %q", name))
			return
		}
	}
	s.mu.Lock()
	if mode != nil {
		s.mode = *mode
	}
	if lag != nil {
		s.lag = *lag
	}
	if delay != nil {
		s.lookupDelay = *delay
	}
	if webhook != nil {
		s.webhook = *webhook
	}
	v := s.configLocked()
	s.mu.Unlock()
	writeJSON(w, http.StatusOK, v)
}

func parseWebhook(raw json.RawMessage) (*WebhookConfig, error) {
	if bytes.Equal(bytes.TrimSpace(raw), []byte("null")) {
		return nil, nil
	}
	var in struct {
		URL     string `json:"url"`
		Secret  string `json:"secret"`
		DelayMS int64  `json:"delay_ms"`
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&in); err != nil {
		return nil, err
	}
	u, err := url.Parse(in.URL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("url must be an absolute http(s) URL, got %q", in.URL)
	}
	if in.DelayMS < 0 {
		return nil, errors.New("delay_ms must not be negative")
	}
	return &WebhookConfig{URL: in.URL, Secret: in.Secret, Delay: time.Duration(in.DelayMS) * time.Millisecond}, nil
}

// handleSetFaults serves POST /admin/faults: {"reference"?, "faults":[...]} replaces that
// reference's queue (no reference: the whole-run queue), like SetFaults.
func (s *Server) handleSetFaults(w http.ResponseWriter, r *http.Request) {
	var in struct {
		Reference string  `json:"reference"`
		Faults    []Fault `json:"faults"`
	}
	if !decodeStrict(w, r, &in) {
		return
	}
	for i, f := range in.Faults {
		if err := f.validate(); err != nil {
			writeError(w, http.StatusBadRequest, "bad_fault", fmt.Sprintf("faults[%d]: %v", i, err))
			return
		}
	}
	s.SetFaults(in.Reference, in.Faults...)
	writeJSON(w, http.StatusOK, map[string]any{"reference": in.Reference, "queued": len(in.Faults)})
}

// handleAdminCreate serves POST /admin/orders: {"client_reference", "params"?} creates an order
// directly, bypassing keys and faults: a second order placed at the supplier by other means, or
// evidence that matches no operation. It sends a webhook like any other order.
func (s *Server) handleAdminCreate(w http.ResponseWriter, r *http.Request) {
	var in struct {
		ClientReference string          `json:"client_reference"`
		Params          json.RawMessage `json:"params"`
	}
	if !decodeStrict(w, r, &in) {
		return
	}
	params := json.RawMessage("{}")
	if len(in.Params) > 0 && !bytes.Equal(bytes.TrimSpace(in.Params), []byte("null")) {
		canonical, _, err := parseObject(in.Params)
		if err != nil {
			writeError(w, http.StatusBadRequest, "bad_params", "params: "+err.Error())
			return
		}
		params = canonical
	}
	_, status, body, err := s.commit(in.ClientReference, params, "", [32]byte{}, false)
	if err != nil {
		writeError(w, http.StatusServiceUnavailable, "storage_unavailable", "the order could not be stored: "+err.Error())
		return
	}
	writeRaw(w, status, body)
}

// ordersView is the answer of GET /admin/orders: the ground truth, ignoring the lookup lag.
type ordersView struct {
	Total       int            `json:"total"`
	ByReference map[string]int `json:"by_reference"`
	Orders      []*Order       `json:"orders"`
}

// handleAdminOrders serves GET /admin/orders[?client_reference=X]; with the parameter, only
// that reference is reported (by_reference then holds it even at 0).
func (s *Server) handleAdminOrders(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	v := ordersView{ByReference: make(map[string]int)}
	s.mu.Lock()
	if q.Has("client_reference") {
		ref := q.Get("client_reference")
		v.Orders = append([]*Order{}, s.orders.byRef[ref]...)
		v.ByReference[ref] = len(v.Orders)
	} else {
		v.Orders = append([]*Order{}, s.orders.all...)
		for ref, os := range s.orders.byRef {
			v.ByReference[ref] = len(os)
		}
	}
	s.mu.Unlock()
	v.Total = len(v.Orders)
	writeJSON(w, http.StatusOK, v)
}

type requestsView struct {
	Total       int                     `json:"total"`
	ByReference map[string]requestTimes `json:"by_reference"`
}

type requestTimes struct {
	Count      int         `json:"count"`
	ReceivedAt []time.Time `json:"received_at"`
}

// handleAdminRequests serves GET /admin/requests[?client_reference=X]: how many create requests
// arrived per reference, and when, like CreateRequests.
func (s *Server) handleAdminRequests(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	v := requestsView{ByReference: make(map[string]requestTimes)}
	add := func(ref string, times []time.Time) {
		utc := make([]time.Time, len(times))
		for i, t := range times {
			utc[i] = t.UTC()
		}
		v.ByReference[ref] = requestTimes{Count: len(times), ReceivedAt: utc}
		v.Total += len(times)
	}
	s.mu.Lock()
	if q.Has("client_reference") {
		ref := q.Get("client_reference")
		add(ref, s.requests[ref])
	} else {
		for ref, times := range s.requests {
			add(ref, times)
		}
	}
	s.mu.Unlock()
	writeJSON(w, http.StatusOK, v)
}

// handleAdminDeliveries serves GET /admin/deliveries: every webhook attempt, like Deliveries.
func (s *Server) handleAdminDeliveries(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, map[string]any{"deliveries": append([]Delivery{}, s.Deliveries()...)})
}

// handleReset serves POST /admin/reset, like Reset; 500 when the data file could not be emptied.
func (s *Server) handleReset(w http.ResponseWriter, _ *http.Request) {
	if err := s.reset(); err != nil {
		writeError(w, http.StatusInternalServerError, "reset_incomplete", err.Error())
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// decodeStrict reads one JSON value into v, refusing unknown fields; it answers 400 or 413 and
// reports false when it could not.
func decodeStrict(w http.ResponseWriter, r *http.Request, v any) bool {
	body, ok := readBody(w, r)
	if !ok {
		return false
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		writeError(w, http.StatusBadRequest, "malformed_json", err.Error())
		return false
	}
	if dec.More() {
		writeError(w, http.StatusBadRequest, "malformed_json", "body must hold exactly one JSON value")
		return false
	}
	return true
}
