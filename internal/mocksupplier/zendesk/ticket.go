package zendesk

import (
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/actledger/actledger/internal/mocksupplier/fault"
)

// timeFormat is how Zendesk writes times: ISO 8601, in UTC.
const timeFormat = "2006-01-02T15:04:05Z"

// Ticket is the fake's ticket object: the fields of Zendesk's that a client creating tickets
// reads, in Zendesk's names and JSON shape (absent values are null).
type Ticket struct {
	URL         string   `json:"url"`
	ID          int64    `json:"id"`
	ExternalID  *string  `json:"external_id"`
	Subject     *string  `json:"subject"`
	RawSubject  *string  `json:"raw_subject"`
	Description string   `json:"description"`
	Priority    *string  `json:"priority"`
	Status      string   `json:"status"`
	Type        *string  `json:"type"`
	RequesterID int64    `json:"requester_id"`
	SubmitterID int64    `json:"submitter_id"`
	Tags        []string `json:"tags"`
	Via         via      `json:"via"`
	CreatedAt   string   `json:"created_at"`
	UpdatedAt   string   `json:"updated_at"`

	created time.Time // for the lookup lag
}

type via struct {
	Channel string `json:"channel"`
}

func (t *Ticket) clone() Ticket {
	c := *t
	c.Tags = slices.Clone(t.Tags)
	return c
}

// ticketInput is the part of a create request's ticket object the fake reads; other properties
// are accepted and ignored.
type ticketInput struct {
	Subject *string `json:"subject"`
	Comment *struct {
		Body     string `json:"body"`
		HTMLBody string `json:"html_body"`
	} `json:"comment"`
	ExternalID  *string  `json:"external_id"`
	Priority    *string  `json:"priority"`
	Status      *string  `json:"status"`
	Type        *string  `json:"type"`
	Tags        []string `json:"tags"`
	RequesterID *int64   `json:"requester_id"`
}

// keyEntry is what the fake remembers about one Idempotency-Key.
type keyEntry struct {
	fingerprint [32]byte
	first       time.Time
	done        bool
	status      int
	body        []byte
	location    string
}

// handleCreate serves POST /api/v2/tickets.json: the rate limiter, then the key (replay,
// mismatch, in flight), then validation, then the commit, whose answer is stored under the key.
func (s *Server) handleCreate(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	body, _ := io.ReadAll(r.Body) // ServeHTTP has read it already
	in, canonical, bad := parseTicket(body)

	s.mu.Lock()
	if f, ok := s.takeFaultLocked(true); ok {
		s.mu.Unlock()
		s.log.InfoContext(ctx, "fault injected", "fault", string(f.Kind))
		w.Header().Set("Retry-After", strconv.FormatInt(retryAfterSeconds(f.RetryAfter), 10))
		if f.Kind == RateLimited {
			w.Header().Set("Content-Type", "text/plain; charset=utf-8")
			w.WriteHeader(http.StatusTooManyRequests)
			_, _ = io.WriteString(w, "Number of allowed API requests per minute exceeded")
			return
		}
		writeJSON(w, http.StatusServiceUnavailable, errorBody{Error: "ServiceUnavailable", Description: "Please retry after the time in Retry-After."})
		return
	}
	if bad != nil {
		s.mu.Unlock()
		writeJSON(w, bad.status, bad.body)
		return
	}
	key := r.Header.Get("Idempotency-Key")
	fp := sha256.Sum256(append([]byte("POST /api/v2/tickets\n"), canonical...))
	var entry *keyEntry
	if key != "" {
		now := s.now()
		if prev, ok := s.keys[key]; ok && now.Sub(prev.first) >= s.retention {
			delete(s.keys, key) // expired: "the request will create a new ticket"
		}
		if prev, ok := s.keys[key]; ok {
			done, status, stored, loc, same := prev.done, prev.status, prev.body, prev.location, prev.fingerprint == fp
			s.mu.Unlock()
			answerRepeat(w, done, same, status, stored, loc)
			return
		}
		entry = &keyEntry{fingerprint: fp, first: now}
		s.keys[key] = entry
		w.Header().Set("X-Idempotency-Lookup", "miss")
	}
	if bad := validate(in); bad != nil {
		s.releaseKeyLocked(key, entry)
		s.mu.Unlock()
		w.Header().Del("X-Idempotency-Lookup")
		writeJSON(w, bad.status, bad.body)
		return
	}
	taken, faulty := s.takeFaultLocked(false)
	if faulty {
		s.log.InfoContext(ctx, "fault injected", "fault", string(taken.Kind))
	}
	switch {
	case faulty && taken.Kind == KeyInUse:
		s.releaseKeyLocked(key, entry)
		s.mu.Unlock()
		w.Header().Del("X-Idempotency-Lookup")
		writeJSON(w, http.StatusConflict, keyInUse())
		return
	case faulty && taken.Kind == DropBeforeCommit:
		s.releaseKeyLocked(key, entry)
		s.mu.Unlock()
		fault.DropConnection(w)
		return
	}
	t, status, answer := s.commitLocked(r, in)
	if faulty && taken.Kind == Error500AfterCommit {
		status, answer = http.StatusInternalServerError, mustJSON(errorBody{Error: "InternalError", Description: "Something went wrong. Please try again."})
	}
	s.scheduleLocked(t.clone())
	s.mu.Unlock()

	if faulty && taken.Kind == DelayAfterCommit {
		fault.Hold(ctx, taken.Delay)
	}
	location := ""
	if status == http.StatusCreated {
		location = t.URL
	}
	if entry != nil {
		s.mu.Lock()
		entry.done, entry.status, entry.body, entry.location = true, status, answer, location
		s.mu.Unlock()
	}
	if faulty && taken.Kind == DropAfterCommit {
		fault.DropConnection(w)
		return
	}
	if location != "" {
		w.Header().Set("Location", location)
	}
	writeRaw(w, status, answer)
}

// answerRepeat answers a request whose key is known: 400 IdempotentRequestError for another
// body, 409 while the first is still executing, otherwise the stored answer with
// x-idempotency-lookup: hit.
func answerRepeat(w http.ResponseWriter, done, same bool, status int, body []byte, location string) {
	switch {
	case !same:
		writeJSON(w, http.StatusBadRequest, errorBody{
			Error: "IdempotentRequestError", Description: "Request parameters don't match the given idempotency key",
		})
	case !done:
		writeJSON(w, http.StatusConflict, keyInUse())
	default:
		w.Header().Set("X-Idempotency-Lookup", "hit")
		if location != "" {
			w.Header().Set("Location", location)
		}
		writeRaw(w, status, body)
	}
}

func keyInUse() errorBody {
	return errorBody{Error: "Conflict", Description: "A request with this idempotency key is still being processed."}
}

// releaseKeyLocked forgets the key of a request refused before the commit. s.mu must be held.
func (s *Server) releaseKeyLocked(key string, e *keyEntry) {
	if e != nil && s.keys[key] == e {
		delete(s.keys, key)
	}
}

// badRequest is an answer given before anything was executed.
type badRequest struct {
	status int
	body   errorBody
}

// parseTicket decodes {"ticket": {...}} and returns it with the body in canonical form (keys
// sorted, no insignificant whitespace), so key order and spacing never make two bodies differ for
// the idempotency layer.
func parseTicket(body []byte) (ticketInput, []byte, *badRequest) {
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	var whole any
	if err := dec.Decode(&whole); err != nil {
		return ticketInput{}, nil, &badRequest{http.StatusBadRequest, errorBody{Error: "InvalidJSON", Description: "The request body is not valid JSON: " + err.Error()}}
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return ticketInput{}, nil, &badRequest{http.StatusBadRequest, errorBody{Error: "InvalidJSON", Description: "The request body holds more than one JSON value."}}
	}
	canonical := mustJSON(whole)
	var wrapper struct {
		Ticket *json.RawMessage `json:"ticket"`
	}
	if err := json.Unmarshal(body, &wrapper); err != nil || wrapper.Ticket == nil {
		return ticketInput{}, nil, &badRequest{http.StatusBadRequest, errorBody{Error: "InvalidParams", Description: `The body must be {"ticket": {...}}.`}}
	}
	var in ticketInput
	if err := json.Unmarshal(*wrapper.Ticket, &in); err != nil {
		return ticketInput{}, nil, &badRequest{http.StatusBadRequest, errorBody{Error: "InvalidParams", Description: "The ticket object is malformed: " + err.Error()}}
	}
	return in, canonical, nil
}

// validate checks what Zendesk requires of a new ticket: a comment (its first comment is the
// description), and the documented values of priority, status and type.
func validate(in ticketInput) *badRequest {
	details := map[string][]fieldDetail{}
	if in.Comment == nil || strings.TrimSpace(in.Comment.Body+in.Comment.HTMLBody) == "" {
		details["description"] = []fieldDetail{{Description: "Description: cannot be blank", Error: "BlankValue"}}
	}
	check := func(field string, v *string, allowed ...string) {
		if v != nil && !slices.Contains(allowed, *v) {
			details[field] = []fieldDetail{{Description: strings.ToUpper(field[:1]) + field[1:] + ": is invalid", Error: "InvalidValue"}}
		}
	}
	check("priority", in.Priority, "urgent", "high", "normal", "low")
	check("status", in.Status, "new", "open", "pending", "hold", "solved", "closed")
	check("type", in.Type, "problem", "incident", "question", "task")
	if len(details) == 0 {
		return nil
	}
	return &badRequest{http.StatusUnprocessableEntity, errorBody{Error: "RecordInvalid", Description: "Record validation errors", Details: details}}
}

// createAnswer is the 201 body: the ticket and the audit of its creation.
type createAnswer struct {
	Ticket Ticket `json:"ticket"`
	Audit  audit  `json:"audit"`
}

type audit struct {
	ID        int64        `json:"id"`
	TicketID  int64        `json:"ticket_id"`
	CreatedAt string       `json:"created_at"`
	AuthorID  int64        `json:"author_id"`
	Via       via          `json:"via"`
	Events    []auditEvent `json:"events"`
}

type auditEvent struct {
	ID        int64   `json:"id"`
	Type      string  `json:"type"`
	Body      *string `json:"body,omitempty"`
	Public    *bool   `json:"public,omitempty"`
	AuthorID  *int64  `json:"author_id,omitempty"`
	FieldName *string `json:"field_name,omitempty"`
	Value     *string `json:"value,omitempty"`
}

// commitLocked creates the ticket and returns it with its 201 answer. s.mu is held.
func (s *Server) commitLocked(r *http.Request, in ticketInput) (*Ticket, int, []byte) {
	now := s.now().UTC()
	id := s.nextID
	s.nextID++
	scheme := "https"
	if r.TLS == nil {
		scheme = "http"
	}
	desc := in.Comment.Body
	if desc == "" {
		desc = in.Comment.HTMLBody
	}
	t := &Ticket{
		URL:         scheme + "://" + r.Host + "/api/v2/tickets/" + strconv.FormatInt(id, 10) + ".json",
		ID:          id,
		ExternalID:  in.ExternalID,
		Subject:     in.Subject,
		RawSubject:  in.Subject,
		Description: desc,
		Priority:    in.Priority,
		Status:      "new",
		Type:        in.Type,
		RequesterID: agentID,
		SubmitterID: agentID,
		Tags:        append([]string{}, in.Tags...),
		Via:         via{Channel: "api"},
		CreatedAt:   now.Format(timeFormat),
		UpdatedAt:   now.Format(timeFormat),
		created:     now,
	}
	if in.Status != nil {
		t.Status = *in.Status
	}
	if in.RequesterID != nil {
		t.RequesterID = *in.RequesterID
	}
	s.tickets = append(s.tickets, t)
	s.byID[id] = t

	author, public := int64(agentID), true
	field, status := "status", t.Status
	a := audit{
		ID: s.nextAudit, TicketID: id, CreatedAt: t.CreatedAt, AuthorID: agentID, Via: t.Via,
		Events: []auditEvent{
			{ID: s.nextAudit + 1, Type: "Comment", Body: &desc, Public: &public, AuthorID: &author},
			{ID: s.nextAudit + 2, Type: "Create", FieldName: &field, Value: &status},
		},
	}
	s.nextAudit += 3
	return t, http.StatusCreated, mustJSON(createAnswer{Ticket: t.clone(), Audit: a})
}

// listAnswer is the List Tickets answer in offset pagination.
type listAnswer struct {
	Tickets      []Ticket `json:"tickets"`
	NextPage     *string  `json:"next_page"`
	PreviousPage *string  `json:"previous_page"`
	Count        int      `json:"count"`
}

// handleList serves GET /api/v2/tickets.json[?external_id=X]: the tickets older than the lookup
// lag, sorted by id. "External ids don't have to be unique for each ticket": every ticket with
// the external id is listed.
func (s *Server) handleList(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	s.mu.Lock()
	cutoff := s.now().Add(-s.lag)
	out := []Ticket{}
	for _, t := range s.tickets {
		if t.created.After(cutoff) {
			continue
		}
		if q.Has("external_id") && (t.ExternalID == nil || *t.ExternalID != q.Get("external_id")) {
			continue
		}
		out = append(out, t.clone())
	}
	s.mu.Unlock()
	writeJSON(w, http.StatusOK, listAnswer{Tickets: out, Count: len(out)})
}

// handleShow serves GET /api/v2/tickets/{id}[.json], which is consistent: no lookup lag.
func (s *Server) handleShow(w http.ResponseWriter, r *http.Request) {
	id, err := strconv.ParseInt(strings.TrimSuffix(r.PathValue("id"), ".json"), 10, 64)
	s.mu.Lock()
	t, ok := s.byID[id]
	var c Ticket
	if ok {
		c = t.clone()
	}
	s.mu.Unlock()
	if err != nil || !ok {
		writeJSON(w, http.StatusNotFound, errorBody{Error: "RecordNotFound", Description: "Not found"})
		return
	}
	writeJSON(w, http.StatusOK, map[string]Ticket{"ticket": c})
}
