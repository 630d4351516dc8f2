package stripe

import (
	"maps"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// PaymentIntent is the fake's PaymentIntent object: the fields of Stripe's that a client
// integrating payments reads, in Stripe's names and JSON shape (absent values are null).
type PaymentIntent struct {
	ID                 string            `json:"id"`
	Object             string            `json:"object"`
	Amount             int64             `json:"amount"`
	AmountCapturable   int64             `json:"amount_capturable"`
	AmountReceived     int64             `json:"amount_received"`
	CaptureMethod      string            `json:"capture_method"`
	ClientSecret       string            `json:"client_secret"`
	ConfirmationMethod string            `json:"confirmation_method"`
	Created            int64             `json:"created"`
	Currency           string            `json:"currency"`
	Customer           *string           `json:"customer"`
	Description        *string           `json:"description"`
	LastPaymentError   *ErrorObject      `json:"last_payment_error"`
	LatestCharge       *string           `json:"latest_charge"`
	Livemode           bool              `json:"livemode"`
	Metadata           map[string]string `json:"metadata"`
	PaymentMethod      *string           `json:"payment_method"`
	// Status is requires_payment_method, requires_confirmation, requires_capture or succeeded
	// (the statuses the fake reaches; Stripe has more).
	Status string `json:"status"`

	createdAt time.Time // for the search lag, finer than Created
}

func (pi *PaymentIntent) clone() PaymentIntent {
	c := *pi
	c.Metadata = maps.Clone(pi.Metadata)
	if pi.LastPaymentError != nil {
		e := *pi.LastPaymentError
		c.LastPaymentError = &e
	}
	return c
}

// charge is the part of a Charge the fake keeps: what refunds need and what charge.refunded
// carries.
type charge struct {
	ID             string            `json:"id"`
	Object         string            `json:"object"`
	Amount         int64             `json:"amount"`
	AmountRefunded int64             `json:"amount_refunded"`
	Captured       bool              `json:"captured"`
	Created        int64             `json:"created"`
	Currency       string            `json:"currency"`
	Livemode       bool              `json:"livemode"`
	Metadata       map[string]string `json:"metadata"`
	Paid           bool              `json:"paid"`
	PaymentIntent  string            `json:"payment_intent"`
	Refunded       bool              `json:"refunded"`
	Status         string            `json:"status"`
}

func (c *charge) clone() charge {
	out := *c
	out.Metadata = maps.Clone(c.Metadata)
	return out
}

// intentParams are the create parameters the fake takes; others are refused as unknown.
var intentParams = []string{
	"amount", "currency", "customer", "description", "payment_method", "confirm", "off_session",
	"capture_method", "receipt_email", "statement_descriptor", "automatic_payment_methods[enabled]",
	"payment_method_types[]", "setup_future_usage", "return_url",
}

// handleCreateIntent serves POST /v1/payment_intents. With confirm=true it charges at once (the
// fake's payment methods never fail unless a CardDeclined fault says so): status succeeded, or
// requires_capture with capture_method=manual.
func (s *Server) handleCreateIntent(w http.ResponseWriter, r *http.Request) {
	s.create(w, r, createSpec{
		path:   PathPaymentIntents,
		check:  checkIntent,
		commit: s.commitIntentLocked,
	})
}

func checkIntent(form url.Values) *refusal {
	if ref := checkKnown(form, intentParams...); ref != nil {
		return ref
	}
	if _, _, ref := formInt(form, "amount", true); ref != nil {
		return ref
	}
	cur := form.Get("currency")
	if cur == "" {
		return invalid("parameter_missing", "currency", "Missing required param: currency.")
	}
	if len(cur) != 3 || strings.ToLower(cur) != strings.Map(asciiLetter, strings.ToLower(cur)) {
		return invalid("", "currency", "Invalid currency: "+cur+".")
	}
	confirm, ref := formBool(form, "confirm")
	if ref != nil {
		return ref
	}
	if _, ref := formBool(form, "off_session"); ref != nil {
		return ref
	}
	if confirm && form.Get("payment_method") == "" {
		return invalid("parameter_missing", "payment_method",
			"You cannot confirm this PaymentIntent because it's missing a payment method.")
	}
	switch form.Get("capture_method") {
	case "", "automatic", "automatic_async", "manual":
	default:
		return invalid("", "capture_method", "Invalid capture_method: "+form.Get("capture_method"))
	}
	return checkMetadata(metadata(form))
}

func asciiLetter(r rune) rune {
	if r >= 'a' && r <= 'z' {
		return r
	}
	return -1
}

// commitIntentLocked creates the PaymentIntent (and, once confirmed, its charge) and its events.
// s.mu is held.
func (s *Server) commitIntentLocked(form url.Values, key string, fault *Fault) (outcome, *refusal) {
	now := s.now()
	amount, _, _ := formInt(form, "amount", true)
	confirm, _ := formBool(form, "confirm")
	pi := &PaymentIntent{
		ID:                 newID("pi_"),
		Object:             "payment_intent",
		Amount:             amount,
		CaptureMethod:      "automatic",
		ConfirmationMethod: "automatic",
		Created:            now.Unix(),
		Currency:           strings.ToLower(form.Get("currency")),
		Customer:           optional(form, "customer"),
		Description:        optional(form, "description"),
		Livemode:           s.livemode,
		Metadata:           metadata(form),
		PaymentMethod:      optional(form, "payment_method"),
		createdAt:          now,
	}
	if m := form.Get("capture_method"); m != "" {
		pi.CaptureMethod = m
	}
	pi.ClientSecret = pi.ID + "_secret_" + newID("")
	declined := fault != nil && fault.Kind == CardDeclined
	events := []Event{s.newEvent("payment_intent.created", key, pi.clone())}
	switch {
	case declined:
		ch := s.newChargeLocked(pi, "failed", now)
		pi.LatestCharge = &ch.ID
		pi.PaymentMethod = nil
		pi.Status = "requires_payment_method"
		pi.LastPaymentError = &ErrorObject{
			Type: "card_error", Code: "card_declined", DeclineCode: "generic_decline",
			Message: "Your card was declined.",
		}
		events = append(events, s.newEvent("payment_intent.payment_failed", key, pi.clone()))
	case confirm:
		ch := s.newChargeLocked(pi, "succeeded", now)
		pi.LatestCharge = &ch.ID
		if pi.CaptureMethod == "manual" {
			ch.Captured = false
			pi.AmountCapturable = amount
			pi.Status = "requires_capture"
			events = append(events, s.newEvent("payment_intent.amount_capturable_updated", key, pi.clone()))
		} else {
			pi.AmountReceived = amount
			pi.Status = "succeeded"
			events = append(events, s.newEvent("payment_intent.succeeded", key, pi.clone()))
		}
	case pi.PaymentMethod != nil:
		pi.Status = "requires_confirmation"
	default:
		pi.Status = "requires_payment_method"
	}
	s.intents = append(s.intents, pi)
	s.intentByID[pi.ID] = pi
	if declined {
		e := *pi.LastPaymentError
		snapshot := pi.clone()
		e.PaymentIntent = &snapshot
		return outcome{status: http.StatusPaymentRequired, body: errorJSON(e), events: events}, nil
	}
	return outcome{status: http.StatusOK, body: mustJSON(pi), events: events}, nil
}

// newChargeLocked records the charge a confirmation makes. s.mu is held.
func (s *Server) newChargeLocked(pi *PaymentIntent, status string, now time.Time) *charge {
	ch := &charge{
		ID:            newID("ch_"),
		Object:        "charge",
		Amount:        pi.Amount,
		Captured:      status == "succeeded",
		Created:       now.Unix(),
		Currency:      pi.Currency,
		Livemode:      pi.Livemode,
		Metadata:      maps.Clone(pi.Metadata), // a charge carries its PaymentIntent's metadata
		Paid:          status == "succeeded",
		PaymentIntent: pi.ID,
		Status:        status,
	}
	s.charges[ch.ID] = ch
	return ch
}

// handleGetIntent serves GET /v1/payment_intents/{id}, which is consistent: no search lag.
func (s *Server) handleGetIntent(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	s.mu.Lock()
	pi, ok := s.intentByID[id]
	var c PaymentIntent
	if ok {
		c = pi.clone()
	}
	s.mu.Unlock()
	if !ok {
		writeError(w, http.StatusNotFound, ErrorObject{
			Type: "invalid_request_error", Code: "resource_missing", Param: "intent",
			Message: "No such payment_intent: '" + id + "'",
		})
		return
	}
	writeJSON(w, http.StatusOK, c)
}

// handleListIntents serves GET /v1/payment_intents[?customer=…][&created[…]=…][&starting_after=…]
// [&limit=n]: every PaymentIntent, newest first, consistent (a list is not the search, and does
// not lag), a page at a time (https://docs.stripe.com/api/payment_intents/list,
// https://docs.stripe.com/api/pagination).
func (s *Server) handleListIntents(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	s.mu.Lock()
	var match []PaymentIntent
	for i := len(s.intents) - 1; i >= 0; i-- {
		pi := s.intents[i]
		if c := q.Get("customer"); c != "" && (pi.Customer == nil || *pi.Customer != c) {
			continue
		}
		match = append(match, pi.clone())
	}
	s.mu.Unlock()
	writeList(w, q, "/v1/payment_intents", match, func(pi PaymentIntent) (string, int64) { return pi.ID, pi.Created })
}
