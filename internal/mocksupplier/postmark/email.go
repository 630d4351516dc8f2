package postmark

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"maps"
	"net/http"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"time"
	_ "time/tzdata" // Eastern time wherever the tests run

	"github.com/google/uuid"

	"github.com/actledger/actledger/internal/mocksupplier/fault"
)

// API error codes: the ErrorCode of an answer, from Postmark's table
// (https://postmarkapp.com/developer/api/overview#error-codes). The fake sends the ones marked;
// the others are named so recipes and tests can refer to them.
const (
	ErrBadToken                    = 10  // sent: missing or wrong API token (with HTTP 401)
	ErrMaintenance                 = 100 // the API is offline for maintenance
	ErrInvalidEmailRequest         = 300 // sent: the message is not valid (addresses, no body, >50 recipients)
	ErrSenderSignatureNotFound     = 400
	ErrSenderSignatureNotConfirmed = 401
	ErrInvalidJSON                 = 402 // sent: the body is not JSON
	ErrIncompatibleJSON            = 403 // sent: JSON, but not the shape expected
	ErrNotAllowedToSend            = 405 // the account ran out of credits
	ErrInactiveRecipient           = 406 // sent: a recipient is deactivated
	ErrJSONRequired                = 409
	ErrAccountPending              = 412
	ErrAccountMayNotSend           = 413
	ErrRateLimitExceeded           = 429 // sent with HTTP 429 by the RateLimit429 fault
)

// maxBody bounds request bodies (Postmark's own limit for the Email API is 10 MB).
const maxBody = 10 << 20

// maxRecipients is Postmark's limit of To, Cc and Bcc addresses per message together.
const maxRecipients = 50

// Message is one message Postmark accepted for sending, as the fake stores it. Messages never
// change once accepted.
type Message struct {
	MessageID     string
	From          string
	To, Cc, Bcc   []string // addresses, "Name <address>" as given
	Subject       string
	TextBody      string
	HTMLBody      string
	Tag           string
	MessageStream string
	Metadata      map[string]string
	// SubmittedAt is when it was accepted.
	SubmittedAt time.Time
}

func (m *Message) carries(reference string) bool {
	for _, v := range m.Metadata {
		if v == reference {
			return true
		}
	}
	return false
}

func (m *Message) clone() Message {
	c := *m
	c.To = append([]string(nil), m.To...)
	c.Cc = append([]string(nil), m.Cc...)
	c.Bcc = append([]string(nil), m.Bcc...)
	c.Metadata = maps.Clone(m.Metadata)
	return c
}

// sendRequest is the body of POST /email (https://postmarkapp.com/developer/api/email-api),
// the fields the fake reads.
type sendRequest struct {
	From          string            `json:"From"`
	To            string            `json:"To"`
	Cc            string            `json:"Cc"`
	Bcc           string            `json:"Bcc"`
	Subject       string            `json:"Subject"`
	Tag           string            `json:"Tag"`
	HTMLBody      string            `json:"HtmlBody"`
	TextBody      string            `json:"TextBody"`
	MessageStream string            `json:"MessageStream"`
	Metadata      map[string]scalar `json:"Metadata"`
}

// scalar is a Metadata value: a string, or a number or boolean kept as its JSON text (Postmark's
// own webhook examples carry numeric metadata values). Objects and arrays are refused.
type scalar string

func (v *scalar) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err == nil {
		*v = scalar(s)
		return nil
	}
	var x any
	if err := json.Unmarshal(b, &x); err != nil {
		return err
	}
	switch x.(type) {
	case float64, bool:
		*v = scalar(bytes.TrimSpace(b))
		return nil
	}
	return &json.UnmarshalTypeError{Value: "metadata value", Type: reflect.TypeFor[string]()}
}

// metadata is the Metadata of req as strings.
func (req sendRequest) metadata() map[string]string {
	out := make(map[string]string, len(req.Metadata))
	for k, v := range req.Metadata {
		out[k] = string(v)
	}
	return out
}

// sendResponse is the answer to an accepted message.
type sendResponse struct {
	To          string `json:"To"`
	SubmittedAt string `json:"SubmittedAt"`
	MessageID   string `json:"MessageID"`
	ErrorCode   int    `json:"ErrorCode"`
	Message     string `json:"Message"`
}

// eastern is the zone of Postmark's timestamps ("Our API uses Eastern Time Zone"), daylight
// saving time included, as a statement's fromdate and todate are written in it.
var eastern = func() *time.Location {
	loc, err := time.LoadLocation("America/New_York")
	if err != nil {
		panic("postmark: the Eastern time zone: " + err.Error())
	}
	return loc
}()

// submittedAtFormat is the shape of SubmittedAt in Postmark's example,
// "2014-02-17T07:25:01.4178645-05:00".
const submittedAtFormat = "2006-01-02T15:04:05.0000000-07:00"

// address is the mailbox of "addr" or "Name <addr>", checked loosely against the pattern
// Postmark publishes (https://postmarkapp.com/support/article/1180-what-does-errorcode-300-mean).
var (
	mailboxPattern = regexp.MustCompile(`^[a-zA-Z0-9.!#$%&'` + "`" + `*+\-/=^_{}|~]+$`)
	domainPattern  = regexp.MustCompile(`^((\.)?[a-zA-Z0-9\-])+$`)
)

func address(s string) (string, bool) {
	s = strings.TrimSpace(s)
	if i := strings.LastIndex(s, "<"); i >= 0 && strings.HasSuffix(s, ">") {
		s = s[i+1 : len(s)-1]
	}
	local, domain, ok := strings.Cut(s, "@")
	if !ok || local == "" || domain == "" || strings.HasPrefix(local, ".") || strings.HasSuffix(local, ".") ||
		strings.Contains(local, "..") || !mailboxPattern.MatchString(local) || !domainPattern.MatchString(domain) {
		return "", false
	}
	return strings.ToLower(s), true
}

// recipients splits a comma-separated To, Cc or Bcc into addresses.
func recipients(list string) []string {
	var out []string
	for part := range strings.SplitSeq(list, ",") {
		if p := strings.TrimSpace(part); p != "" {
			out = append(out, p)
		}
	}
	return out
}

// parseSend decodes and validates a send body as Postmark does: 422 with ErrorCode 402 for a
// body that is not JSON, 403 for JSON of the wrong shape, 300 for a message that cannot be sent,
// 406 for an inactive recipient. ok is false when it has written such an answer.
func (s *Server) parseSend(w http.ResponseWriter, raw []byte) (sendRequest, bool) {
	var req sendRequest
	dec := json.NewDecoder(bytes.NewReader(raw))
	if err := dec.Decode(&req); err != nil {
		var typeErr *json.UnmarshalTypeError
		if errors.As(err, &typeErr) {
			writeError(w, http.StatusUnprocessableEntity, ErrIncompatibleJSON,
				"The JSON input you provided is syntactically correct, but still not the one we expect.")
		} else {
			writeError(w, http.StatusUnprocessableEntity, ErrInvalidJSON, "The JSON input you provided is syntactically incorrect.")
		}
		return req, false
	}
	if _, err := dec.Token(); err != io.EOF {
		writeError(w, http.StatusUnprocessableEntity, ErrInvalidJSON, "The JSON input you provided is syntactically incorrect.")
		return req, false
	}
	invalid := func(msg string) (sendRequest, bool) {
		writeError(w, http.StatusUnprocessableEntity, ErrInvalidEmailRequest, msg)
		return req, false
	}
	if _, ok := address(req.From); !ok {
		return invalid("Invalid 'From' address: '" + req.From + "'.")
	}
	all := append(append(recipients(req.To), recipients(req.Cc)...), recipients(req.Bcc)...)
	if len(recipients(req.To)) == 0 {
		return invalid("Zero recipients specified")
	}
	if len(all) > maxRecipients {
		return invalid("Maximum of " + strconv.Itoa(maxRecipients) + " recipients allowed per email message")
	}
	var inactive []string
	for _, a := range all {
		addr, ok := address(a)
		if !ok {
			return invalid("Error parsing 'To': Illegal email address '" + a + "'.")
		}
		if s.inactive[addr] {
			inactive = append(inactive, addr)
		}
	}
	if req.TextBody == "" && req.HTMLBody == "" {
		return invalid("Provide either email TextBody or HtmlBody or both.")
	}
	seen := map[string]bool{}
	for k := range req.Metadata {
		if seen[strings.ToLower(k)] {
			return invalid("Metadata keys must be unique regardless of case: '" + k + "'.")
		}
		seen[strings.ToLower(k)] = true
	}
	if len(inactive) > 0 {
		writeError(w, http.StatusUnprocessableEntity, ErrInactiveRecipient,
			"You tried to send to recipient(s) that have been marked as inactive. Found inactive addresses: "+
				strings.Join(inactive, ", ")+". Inactive recipients are ones that have generated a hard bounce, a spam complaint, or a manual suppression.")
		return req, false
	}
	if req.MessageStream == "" {
		req.MessageStream = "outbound"
	}
	return req, true
}

// handleSend serves POST /email: credential, body, then the next fault, then the commit.
func (s *Server) handleSend(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	if !s.authenticate(w, r) {
		return
	}
	raw, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxBody))
	if err != nil {
		writeError(w, http.StatusRequestEntityTooLarge, 0, "The request exceeded Postmark's size limit.")
		return
	}
	req, ok := s.parseSend(w, raw)
	if !ok {
		return
	}

	s.mu.Lock()
	taken, faulty := s.popFaultLocked(req.metadata())
	s.mu.Unlock()
	if faulty {
		s.log.InfoContext(ctx, "fault injected", "fault", string(taken.Kind))
		if taken.beforeCommit() {
			s.refuse(w, taken)
			return
		}
	}

	m := s.commit(req)
	s.log.DebugContext(ctx, "message accepted", "message_id", m.MessageID)
	if faulty {
		switch taken.Kind {
		case DropAfterCommit:
			fault.DropConnection(w)
			return
		case Error500AfterCommit:
			writeError(w, http.StatusInternalServerError, 0, "Internal Server Error")
			return
		case DelayAfterCommit:
			if !fault.Hold(ctx, time.Duration(taken.MS)*time.Millisecond) {
				return
			}
		}
	}
	writeJSON(w, http.StatusOK, sendResponse{
		To: req.To, SubmittedAt: m.SubmittedAt.In(eastern).Format(submittedAtFormat),
		MessageID: m.MessageID, ErrorCode: 0, Message: "OK",
	})
}

// commit accepts the message: from then on it exists whatever the client is told.
func (s *Server) commit(req sendRequest) *Message {
	s.mu.Lock()
	defer s.mu.Unlock()
	m := &Message{
		MessageID: uuid.NewString(), From: req.From,
		To: recipients(req.To), Cc: recipients(req.Cc), Bcc: recipients(req.Bcc),
		Subject: req.Subject, TextBody: req.TextBody, HTMLBody: req.HTMLBody, Tag: req.Tag,
		MessageStream: req.MessageStream, Metadata: req.metadata(), SubmittedAt: s.now(),
	}
	s.messages = append(s.messages, m)
	return m
}

// refuse answers a fault that lets nothing be sent.
func (s *Server) refuse(w http.ResponseWriter, f Fault) {
	switch f.Kind {
	case RateLimit429:
		if f.RetryAfterS > 0 {
			w.Header().Set("Retry-After", strconv.Itoa(f.RetryAfterS))
		}
		writeError(w, http.StatusTooManyRequests, ErrRateLimitExceeded, "Rate limit exceeded.")
	case Reject422:
		code := f.ErrorCode
		if code == 0 {
			code = ErrInvalidEmailRequest
		}
		writeError(w, http.StatusUnprocessableEntity, code, "Refused by an injected fault.")
	case Error500BeforeCommit:
		writeError(w, http.StatusInternalServerError, 0, "Internal Server Error")
	case Unauthorized401:
		writeError(w, http.StatusUnauthorized, ErrBadToken, "Request does not contain a valid Server token.")
	}
}
