package traffic

import (
	"bytes"
	"io"
	"net/http"
	"sync"
	"time"
)

// Request is one request as a fake received it, whatever it was answered.
type Request struct {
	Method string
	// Path is the URL path; RawQuery the query string as sent.
	Path     string
	RawQuery string
	// Header is a copy of the request's headers, Authorization included.
	Header http.Header
	// Body is the request body, for a fake that reads it before routing the request (at most
	// the fake's limit); nil for a fake that records requests unread.
	Body []byte
	At   time.Time
}

// Log records the requests a fake receives, oldest first. The zero value is an empty log; it is
// safe for concurrent use.
type Log struct {
	mu       sync.Mutex
	requests []Request
}

// Read reads r's body, at most limit bytes (w learns of a larger one, as http.MaxBytesReader
// tells it), records r, received at at, with what it read, and leaves that in r.Body for the
// handler to read again. The error is the read's: the request is recorded all the same.
func (l *Log) Read(w http.ResponseWriter, r *http.Request, limit int64, at time.Time) error {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, limit))
	l.Record(r, body, at)
	r.Body = io.NopCloser(bytes.NewReader(body))
	return err
}

// Record appends r, received at at, with its body (nil when the fake has not read it).
func (l *Log) Record(r *http.Request, body []byte, at time.Time) {
	rec := Request{
		Method:   r.Method,
		Path:     r.URL.Path,
		RawQuery: r.URL.RawQuery,
		Header:   r.Header.Clone(),
		Body:     append([]byte(nil), body...),
		At:       at,
	}
	l.mu.Lock()
	l.requests = append(l.requests, rec)
	l.mu.Unlock()
}

// All returns every request recorded so far, oldest first, as copies the caller may change.
func (l *Log) All() []Request {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := make([]Request, len(l.requests))
	for i, r := range l.requests {
		r.Header = r.Header.Clone()
		r.Body = append([]byte(nil), r.Body...)
		out[i] = r
	}
	return out
}
