package mocksupplier

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/actledger/actledger/internal/mocksupplier/fault"
)

// maxBody bounds request bodies, as a real API would.
const maxBody = 1 << 20

// Order is one order as the supplier stores and returns it. Orders never change once created.
type Order struct {
	// ID is the supplier's reference ("ord_…"), the provider_reference actledger records.
	ID string `json:"id"`
	// ClientReference is the caller's reference from the create body ("" when it sent none).
	ClientReference string `json:"client_reference"`
	// Status is always "created".
	Status    string    `json:"status"`
	CreatedAt time.Time `json:"created_at"`
	// Params is the create body (for orders made through POST /admin/orders, the params given
	// there) as a JSON object with sorted keys.
	Params json.RawMessage `json:"params"`
}

// orderStore indexes orders by id and by reference so neither creation nor lookup scans all
// orders; all keeps creation order for the admin listing.
type orderStore struct {
	byID  map[string]*Order
	byRef map[string][]*Order
	all   []*Order
}

func newOrderStore() orderStore {
	return orderStore{byID: make(map[string]*Order), byRef: make(map[string][]*Order)}
}

func (st *orderStore) add(o *Order) {
	st.byID[o.ID] = o
	st.byRef[o.ClientReference] = append(st.byRef[o.ClientReference], o)
	st.all = append(st.all, o)
}

// newID returns prefix followed by 26 random base32 characters.
func newID(prefix string) string {
	return prefix + strings.ToLower(rand.Text())
}

// parseObject decodes body as one JSON object and returns it re-encoded with sorted keys (so key
// order and whitespace never change the idempotency fingerprint) and its client_reference.
// Numbers keep their literal text.
func parseObject(body []byte) (canonical json.RawMessage, reference string, err error) {
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	var obj map[string]any
	if err := dec.Decode(&obj); err != nil {
		return nil, "", fmt.Errorf("body must be a JSON object: %w", err)
	}
	if obj == nil {
		return nil, "", errors.New("body must be a JSON object, got null")
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, "", errors.New("body must hold exactly one JSON object")
	}
	if v, ok := obj["client_reference"]; ok {
		ref, isString := v.(string)
		if !isString {
			return nil, "", errors.New("client_reference must be a string")
		}
		reference = ref
	}
	canonical, err = json.Marshal(obj)
	if err != nil {
		return nil, "", fmt.Errorf("re-encoding body: %w", err)
	}
	return canonical, reference, nil
}

func readBody(w http.ResponseWriter, r *http.Request) ([]byte, bool) {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxBody))
	if err != nil {
		if _, tooLarge := errors.AsType[*http.MaxBytesError](err); tooLarge {
			writeError(w, http.StatusRequestEntityTooLarge, "body_too_large", err.Error())
		} else {
			writeError(w, http.StatusBadRequest, "bad_body", err.Error())
		}
		return nil, false
	}
	return body, true
}

// handleCreate serves POST /v1/orders: idempotency first (replay, mismatch, in flight), then the
// next fault, then the commit.
func (s *Server) handleCreate(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	body, ok := readBody(w, r)
	if !ok {
		return
	}
	params, ref, err := parseObject(body)
	if err != nil {
		writeError(w, http.StatusBadRequest, "malformed_json", err.Error())
		return
	}
	key := r.Header.Get("Idempotency-Key")
	fp := sha256.Sum256(params)

	s.mu.Lock()
	s.requests[ref] = append(s.requests[ref], s.now())
	if s.popAuthFaultLocked(ref) {
		s.mu.Unlock()
		s.log.InfoContext(ctx, "fault injected", "fault", string(Unauthorized401), "client_reference", ref)
		writeError(w, http.StatusUnauthorized, "unauthorized", "invalid API credentials")
		return
	}
	var entry *keyEntry
	if s.mode == Honour && key != "" {
		if prev, found := s.keys[key]; found {
			s.mu.Unlock()
			s.answerRepeat(w, prev, fp)
			return
		}
		entry = &keyEntry{fingerprint: fp}
		s.keys[key] = entry
	}
	taken, faulty := s.faults.Take(ref)
	s.mu.Unlock()

	if faulty {
		s.log.InfoContext(ctx, "fault injected", "fault", string(taken.Kind), "client_reference", ref)
	}
	if faulty && taken.beforeCommit() {
		// Nothing was executed, so nothing is stored under the key: a retry with the same key
		// runs afresh, as Stripe does for rate limits and refusals.
		if taken.Kind == StallBeforeCommit {
			fault.Hold(ctx, time.Duration(taken.MS)*time.Millisecond)
		}
		s.releaseKey(key, entry)
		switch taken.Kind {
		case StallBeforeCommit:
			writeError(w, http.StatusServiceUnavailable, "unavailable", "supplier stalled and created nothing")
		case UnavailableBeforeCommit:
			w.Header().Set("Retry-After", strconv.Itoa(taken.retryAfter()))
			writeError(w, http.StatusServiceUnavailable, "unavailable", "supplier temporarily unavailable")
		case RateLimit429:
			w.Header().Set("Retry-After", strconv.Itoa(taken.retryAfter()))
			writeError(w, http.StatusTooManyRequests, "rate_limited", "too many requests")
		default: // Reject422
			writeError(w, http.StatusUnprocessableEntity, "rejected", "order rejected by supplier")
		}
		return
	}

	if faulty && taken.Kind == CommitLate {
		// Held past the request's end: the order is created even after the client has given
		// up.
		fault.Hold(context.WithoutCancel(ctx), time.Duration(taken.MS)*time.Millisecond)
	}
	var storedKey string
	if entry != nil {
		storedKey = key
	}
	// A 500 after commit is stored like any answer: a replay with the same key gets the same
	// 500 (Stripe does the same), so only a lookup reveals the order.
	order, status, resp, err := s.commit(ref, params, storedKey, fp, faulty && taken.Kind == Error500AfterCommit)
	if err != nil {
		s.log.ErrorContext(ctx, "order not created: the data file failed", "client_reference", ref, "error", err)
		s.releaseKey(key, entry)
		writeError(w, http.StatusServiceUnavailable, "storage_unavailable", "the supplier could not store the order; nothing was created")
		return
	}
	s.log.DebugContext(ctx, "order created", "order_id", order.ID, "client_reference", ref)
	if faulty && taken.Kind == Delay {
		// The order is committed already; a client that gives up now has lost the answer to
		// an order that exists. The key stays in flight (409) until the answer is ready.
		fault.Hold(ctx, time.Duration(taken.MS)*time.Millisecond)
	}
	s.storeAnswer(entry, status, resp)
	if faulty && taken.Kind == DropAfterCommit {
		fault.DropConnection(w)
		return
	}
	writeRaw(w, status, resp)
}

// commit creates the order and returns it with the answer its create request gets: 201 and the
// order, or the 500 of Error500AfterCommit when fail500. With a data file the order, with the
// Idempotency-Key it was created under (key "" for none), the key's fingerprint fp and that
// answer, is appended and fsynced first, and an error means nothing was created. Only then is
// the order indexed, which is what makes it exist, and its webhook scheduled.
func (s *Server) commit(ref string, params json.RawMessage, key string, fp [32]byte, fail500 bool) (*Order, int, []byte, error) {
	o := &Order{ID: newID("ord_"), ClientReference: ref, Status: "created", Params: params}
	if s.data == nil {
		s.mu.Lock()
		o.CreatedAt = s.now().UTC()
		s.orders.add(o)
		s.scheduleWebhookLocked(o)
		s.mu.Unlock()
		status, body := answer(o, fail500)
		return o, status, body, nil
	}
	s.data.mu.Lock()
	defer s.data.mu.Unlock()
	s.mu.Lock()
	o.CreatedAt = s.now().UTC()
	s.mu.Unlock()
	status, body := answer(o, fail500)
	rec := logRecord{Order: o}
	if key != "" {
		rec.Key, rec.Fingerprint, rec.Status, rec.Body = key, hex.EncodeToString(fp[:]), status, body
	}
	if err := s.data.appendLocked(rec); err != nil {
		return nil, 0, nil, err
	}
	s.mu.Lock()
	s.orders.add(o)
	s.scheduleWebhookLocked(o)
	s.mu.Unlock()
	return o, status, body, nil
}

// answer is what the create request of o is told.
func answer(o *Order, fail500 bool) (int, []byte) {
	if fail500 {
		return http.StatusInternalServerError, errorJSON("internal", "internal server error")
	}
	return http.StatusCreated, mustJSON(o)
}

func mustJSON(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic("mocksupplier: encoding " + fmt.Sprintf("%T", v) + ": " + err.Error())
	}
	return b
}

// handleList serves GET /v1/orders[?client_reference=X]: the orders older than the lookup lag,
// always a JSON array. Without the parameter it lists every visible order.
func (s *Server) handleList(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	s.mu.Lock()
	cutoff := s.now().Add(-s.lag)
	candidates := s.orders.all
	if q.Has("client_reference") {
		ref := q.Get("client_reference")
		candidates = s.orders.byRef[ref]
		s.lookups[ref] = append(s.lookups[ref], s.now())
	}
	delay := s.lookupDelay
	visible := make([]*Order, 0, len(candidates))
	for _, o := range candidates {
		if !o.CreatedAt.After(cutoff) {
			visible = append(visible, o)
		}
	}
	s.mu.Unlock()
	if delay > 0 {
		// The answer is the state when the request arrived, delivered late: orders created
		// meanwhile are not in it.
		fault.Hold(r.Context(), delay)
	}
	writeJSON(w, http.StatusOK, visible)
}

// handleGet serves GET /v1/orders/{id}. Reads by id are consistent (no lag), as they usually are
// at real suppliers; only the search by reference trails.
func (s *Server) handleGet(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	s.mu.Lock()
	o, found := s.orders.byID[id]
	s.mu.Unlock()
	if !found {
		writeError(w, http.StatusNotFound, "not_found", "no order "+strconv.Quote(id))
		return
	}
	writeJSON(w, http.StatusOK, o)
}
