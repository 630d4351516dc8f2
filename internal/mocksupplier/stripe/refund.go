package stripe

import (
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strconv"
)

// Refund is the fake's Refund object, in Stripe's names and JSON shape.
type Refund struct {
	ID            string            `json:"id"`
	Object        string            `json:"object"`
	Amount        int64             `json:"amount"`
	Charge        string            `json:"charge"`
	Created       int64             `json:"created"`
	Currency      string            `json:"currency"`
	Metadata      map[string]string `json:"metadata"`
	PaymentIntent string            `json:"payment_intent"`
	Reason        *string           `json:"reason"`
	// Status is always succeeded: the fake's refunds complete at once.
	Status string `json:"status"`
}

func (re *Refund) clone() Refund {
	c := *re
	c.Metadata = maps.Clone(re.Metadata)
	return c
}

var refundParams = []string{"payment_intent", "charge", "amount", "reason", "instructions_email"}

// handleCreateRefund serves POST /v1/refunds: a refund of a PaymentIntent's (or a charge's)
// successful charge, in full or of amount.
func (s *Server) handleCreateRefund(w http.ResponseWriter, r *http.Request) {
	s.create(w, r, createSpec{
		path:   PathRefunds,
		check:  func(form url.Values) *refusal { _, _, ref := s.refundTargetLocked(form); return ref },
		commit: s.commitRefundLocked,
	})
}

// refundTargetLocked validates a refund request against the current state and returns the charge
// it refunds and the amount. s.mu is held.
func (s *Server) refundTargetLocked(form url.Values) (*charge, int64, *refusal) {
	if ref := checkKnown(form, refundParams...); ref != nil {
		return nil, 0, ref
	}
	if ref := checkMetadata(metadata(form)); ref != nil {
		return nil, 0, ref
	}
	switch form.Get("reason") {
	case "", "duplicate", "fraudulent", "requested_by_customer":
	default:
		return nil, 0, invalid("", "reason", "Invalid reason: "+form.Get("reason"))
	}
	amount, hasAmount, ref := formInt(form, "amount", false)
	if ref != nil {
		return nil, 0, ref
	}
	var ch *charge
	switch piID, chID := form.Get("payment_intent"), form.Get("charge"); {
	case piID != "" && chID != "":
		return nil, 0, invalid("", "charge", "You cannot specify both charge and payment_intent.")
	case piID != "":
		pi, ok := s.intentByID[piID]
		if !ok {
			return nil, 0, invalid("resource_missing", "payment_intent", "No such payment_intent: '"+piID+"'")
		}
		if pi.LatestCharge != nil {
			ch = s.charges[*pi.LatestCharge]
		}
		if ch == nil || ch.Status != "succeeded" || !ch.Captured {
			return nil, 0, invalid("", "payment_intent", "This PaymentIntent does not have a successful charge to refund.")
		}
	case chID != "":
		c, ok := s.charges[chID]
		if !ok {
			return nil, 0, invalid("resource_missing", "charge", "No such charge: '"+chID+"'")
		}
		if c.Status != "succeeded" || !c.Captured {
			return nil, 0, invalid("", "charge", "This charge has not succeeded and cannot be refunded.")
		}
		ch = c
	default:
		return nil, 0, invalid("parameter_missing", "payment_intent", "One of the following params should be provided for this request: payment_intent or charge.")
	}
	remaining := ch.Amount - ch.AmountRefunded
	if remaining == 0 {
		return nil, 0, invalid("charge_already_refunded", "", "Charge "+ch.ID+" has already been refunded.")
	}
	if !hasAmount {
		amount = remaining
	}
	if amount > remaining {
		return nil, 0, invalid("amount_too_large", "amount",
			"Refund amount ("+strconv.FormatInt(amount, 10)+") is greater than the unrefunded amount on the charge ("+strconv.FormatInt(remaining, 10)+").")
	}
	return ch, amount, nil
}

// commitRefundLocked creates the refund and its refund.created and charge.refunded events. The
// check runs again: another refund may have been committed since. s.mu is held.
func (s *Server) commitRefundLocked(form url.Values, key string, _ *Fault) (outcome, *refusal) {
	ch, amount, ref := s.refundTargetLocked(form)
	if ref != nil {
		return outcome{}, ref
	}
	now := s.now()
	re := &Refund{
		ID:            newID("re_"),
		Object:        "refund",
		Amount:        amount,
		Charge:        ch.ID,
		Created:       now.Unix(),
		Currency:      ch.Currency,
		Metadata:      metadata(form),
		PaymentIntent: ch.PaymentIntent,
		Reason:        optional(form, "reason"),
		Status:        "succeeded",
	}
	ch.AmountRefunded += amount
	ch.Refunded = ch.AmountRefunded == ch.Amount
	s.refunds = append(s.refunds, re)
	s.refundByID[re.ID] = re
	events := []Event{
		s.newEvent("refund.created", key, re.clone()),
		s.newEvent("charge.refunded", key, ch.clone()),
	}
	return outcome{status: http.StatusOK, body: mustJSON(re), events: events}, nil
}

// list is Stripe's list object.
type list struct {
	Object  string `json:"object"`
	URL     string `json:"url"`
	HasMore bool   `json:"has_more"`
	Data    any    `json:"data"`
}

// handleListRefunds serves GET /v1/refunds[?payment_intent=…|charge=…][&created[gte|gt|lte|lt]=…]
// [&starting_after=…][&limit=n]: newest first, consistent (list APIs are not subject to the search
// lag), a page at a time (https://docs.stripe.com/api/refunds/list,
// https://docs.stripe.com/api/pagination).
func (s *Server) handleListRefunds(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	s.mu.Lock()
	var match []Refund
	for _, re := range slices.Backward(s.refunds) {
		if pi := q.Get("payment_intent"); pi != "" && re.PaymentIntent != pi {
			continue
		}
		if ch := q.Get("charge"); ch != "" && re.Charge != ch {
			continue
		}
		match = append(match, re.clone())
	}
	s.mu.Unlock()
	writeList(w, q, "/v1/refunds", match, func(re Refund) (string, int64) { return re.ID, re.Created })
}

// writeList answers one page of items (newest first) as Stripe's list object: created[gte],
// created[gt], created[lte] and created[lt] (unix seconds) bound the items' created time;
// starting_after names the last object of the previous page, the page starting after it; limit
// (1 to 100, default 10) bounds the page, and has_more says whether more follow
// (https://docs.stripe.com/api/pagination). A starting_after that names no object of the list
// answers 400 resource_missing, as Stripe answers an unknown id.
func writeList[T any](w http.ResponseWriter, q url.Values, path string, items []T, key func(T) (id string, created int64)) {
	limit, ref := listLimit(q)
	if ref != nil {
		writeError(w, ref.status, ref.err)
		return
	}
	bounds := []struct {
		name string
		keep func(created, bound int64) bool
	}{
		{"created[gte]", func(c, b int64) bool { return c >= b }}, {"created[gt]", func(c, b int64) bool { return c > b }},
		{"created[lte]", func(c, b int64) bool { return c <= b }}, {"created[lt]", func(c, b int64) bool { return c < b }},
	}
	kept := items[:0:0]
	for _, it := range items {
		_, created := key(it)
		ok := true
		for _, b := range bounds {
			if !q.Has(b.name) {
				continue
			}
			bound, err := strconv.ParseInt(q.Get(b.name), 10, 64)
			if err != nil {
				writeError(w, http.StatusBadRequest, invalid("parameter_invalid_integer", b.name, "Invalid integer: "+q.Get(b.name)).err)
				return
			}
			ok = ok && b.keep(created, bound)
		}
		if ok {
			kept = append(kept, it)
		}
	}
	if after := q.Get("starting_after"); after != "" {
		i := slices.IndexFunc(kept, func(it T) bool { id, _ := key(it); return id == after })
		if i < 0 {
			writeError(w, http.StatusBadRequest, invalid("resource_missing", "starting_after", "No such object: '"+after+"'").err)
			return
		}
		kept = kept[i+1:]
	}
	page := list{Object: "list", URL: path, Data: []T{}}
	if len(kept) > limit {
		kept, page.HasMore = kept[:limit], true
	}
	if len(kept) > 0 {
		page.Data = kept
	}
	writeJSON(w, http.StatusOK, page)
}

// listLimit reads limit (1 to 100, default 10).
func listLimit(q url.Values) (int, *refusal) {
	if !q.Has("limit") {
		return 10, nil
	}
	n, err := strconv.Atoi(q.Get("limit"))
	if err != nil || n < 1 || n > 100 {
		return 0, invalid("", "limit", "Invalid limit: must be an integer between 1 and 100.")
	}
	return n, nil
}

// handleGetRefund serves GET /v1/refunds/{id}.
func (s *Server) handleGetRefund(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	s.mu.Lock()
	re, ok := s.refundByID[id]
	var c Refund
	if ok {
		c = re.clone()
	}
	s.mu.Unlock()
	if !ok {
		writeError(w, http.StatusNotFound, ErrorObject{
			Type: "invalid_request_error", Code: "resource_missing", Param: "id",
			Message: "No such refund: '" + id + "'",
		})
		return
	}
	writeJSON(w, http.StatusOK, c)
}
