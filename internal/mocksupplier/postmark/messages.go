package postmark

import (
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// Limits of the outbound message search
// (https://postmarkapp.com/developer/api/messages-api#outbound-message-search).
const (
	maxCount       = 500
	maxCountOffset = 10000
)

// ErrSearchQuery is the ErrorCode the fake sends with a 422 for a search it refuses (count or
// offset missing or out of range, more than one metadata filter, a date it cannot read).
// Postmark's code for these is not in its table; this one is the fake's own.
const ErrSearchQuery = 0

type recipientView struct {
	Email string `json:"Email"`
	Name  string `json:"Name"`
}

// messageView is one item of the outbound message search.
type messageView struct {
	Tag           string            `json:"Tag"`
	MessageID     string            `json:"MessageID"`
	MessageStream string            `json:"MessageStream"`
	To            []recipientView   `json:"To"`
	Cc            []recipientView   `json:"Cc"`
	Bcc           []recipientView   `json:"Bcc"`
	Recipients    []string          `json:"Recipients"`
	ReceivedAt    string            `json:"ReceivedAt"`
	From          string            `json:"From"`
	Subject       string            `json:"Subject"`
	Attachments   []string          `json:"Attachments"`
	Status        string            `json:"Status"`
	TrackOpens    bool              `json:"TrackOpens"`
	TrackLinks    string            `json:"TrackLinks"`
	Metadata      map[string]string `json:"Metadata"`
	Sandboxed     bool              `json:"Sandboxed"`
}

// searchResult is the answer of GET /messages/outbound.
type searchResult struct {
	TotalCount int           `json:"TotalCount"`
	Messages   []messageView `json:"Messages"`
}

func views(list []string) ([]recipientView, []string) {
	out := []recipientView{}
	var addrs []string
	for _, a := range list {
		addr, _ := address(a)
		name := ""
		if i := strings.LastIndex(a, "<"); i > 0 {
			name = strings.Trim(strings.TrimSpace(a[:i]), `"`)
		}
		out = append(out, recipientView{Email: addr, Name: name})
		addrs = append(addrs, addr)
	}
	return out, addrs
}

func (m *Message) view() messageView {
	to, toAddrs := views(m.To)
	cc, ccAddrs := views(m.Cc)
	bcc, bccAddrs := views(m.Bcc)
	return messageView{
		Tag: m.Tag, MessageID: m.MessageID, MessageStream: m.MessageStream,
		To: to, Cc: cc, Bcc: bcc, Recipients: append(append(toAddrs, ccAddrs...), bccAddrs...),
		ReceivedAt: m.SubmittedAt.In(eastern).Format(submittedAtFormat), From: m.From, Subject: m.Subject,
		Attachments: []string{}, Status: "Sent", TrackLinks: "None", Metadata: m.Metadata,
	}
}

// outboundFilter is a parsed query of the outbound message search.
type outboundFilter struct {
	count, offset int
	recipient     string
	fromEmail     string
	tag           string
	status        string
	subject       string
	stream        string
	from, to      time.Time // zero: no bound
	metaKey       string
	metaValue     string
	hasMeta       bool
}

// parseFilter reads the query; problem is non-empty when the fake refuses it.
func parseFilter(q url.Values) (f outboundFilter, problem string) {
	count, err := strconv.Atoi(q.Get("count"))
	if err != nil || count < 1 || count > maxCount {
		return f, "count is required and must be between 1 and 500"
	}
	offset, err := strconv.Atoi(q.Get("offset"))
	if err != nil || offset < 0 {
		return f, "offset is required and must not be negative"
	}
	if count+offset > maxCountOffset {
		return f, "count + offset cannot exceed 10,000 messages"
	}
	f.count, f.offset = count, offset
	f.recipient = strings.ToLower(q.Get("recipient"))
	f.fromEmail = strings.ToLower(q.Get("fromemail"))
	f.tag = q.Get("tag")
	f.status = strings.ToLower(q.Get("status"))
	f.subject = strings.ToLower(q.Get("subject"))
	f.stream = q.Get("messagestream")
	for _, bound := range []struct {
		name string
		dst  *time.Time
	}{{"fromdate", &f.from}, {"todate", &f.to}} {
		v := q.Get(bound.name)
		if v == "" {
			continue
		}
		t, err := time.ParseInLocation("2006-01-02T15:04:05", v, eastern)
		if err != nil {
			t, err = time.ParseInLocation("2006-01-02", v, eastern)
			if err == nil && bound.name == "todate" {
				t = t.Add(24*time.Hour - time.Nanosecond) // a date includes its whole day
			}
		}
		if err != nil {
			return f, bound.name + " must be a date (2021-01-01) or a date and time (2021-01-01T12:00:00)"
		}
		*bound.dst = t
	}
	for name, vs := range q {
		key, ok := strings.CutPrefix(name, "metadata_")
		if !ok || key == "" {
			continue
		}
		if f.hasMeta {
			return f, "only one metadata field can be searched at a time"
		}
		f.metaKey, f.metaValue, f.hasMeta = key, vs[0], true
	}
	return f, ""
}

func (f outboundFilter) matches(m *Message) bool {
	if f.recipient != "" {
		hit := false
		for _, a := range append(append(append([]string(nil), m.To...), m.Cc...), m.Bcc...) {
			if addr, _ := address(a); addr == f.recipient {
				hit = true
			}
		}
		if !hit {
			return false
		}
	}
	if from, _ := address(m.From); f.fromEmail != "" && from != f.fromEmail {
		return false
	}
	if f.tag != "" && m.Tag != f.tag {
		return false
	}
	if f.status != "" && f.status != "sent" {
		return false // every fake message is sent at once
	}
	if f.subject != "" && !strings.Contains(strings.ToLower(m.Subject), f.subject) {
		return false
	}
	if f.stream != "" && m.MessageStream != f.stream {
		return false
	}
	if !f.from.IsZero() && m.SubmittedAt.Before(f.from) {
		return false
	}
	if !f.to.IsZero() && m.SubmittedAt.After(f.to) {
		return false
	}
	if f.hasMeta {
		hit := false
		for k, v := range m.Metadata {
			if strings.EqualFold(k, f.metaKey) && v == f.metaValue {
				hit = true
			}
		}
		if !hit {
			return false
		}
	}
	return true
}

// handleSearch serves GET /messages/outbound?count=…&offset=…[&filters]: the messages that match
// and are older than the lookup lag, newest first. It needs the server token, as Postmark's
// reference says; Accept: application/json is recorded but not enforced.
func (s *Server) handleSearch(w http.ResponseWriter, r *http.Request) {
	if !s.authenticate(w, r) {
		return
	}
	f, problem := parseFilter(r.URL.Query())
	if problem != "" {
		writeError(w, http.StatusUnprocessableEntity, ErrSearchQuery, problem)
		return
	}
	s.mu.Lock()
	cutoff := s.now().Add(-s.lag)
	var hits []*Message
	for i := len(s.messages) - 1; i >= 0; i-- {
		m := s.messages[i]
		if !m.SubmittedAt.After(cutoff) && f.matches(m) {
			hits = append(hits, m)
		}
	}
	res := searchResult{TotalCount: len(hits), Messages: []messageView{}}
	if f.offset < len(hits) {
		for _, m := range hits[f.offset:min(f.offset+f.count, len(hits))] {
			res.Messages = append(res.Messages, m.view())
		}
	}
	s.mu.Unlock()
	writeJSON(w, http.StatusOK, res)
}
