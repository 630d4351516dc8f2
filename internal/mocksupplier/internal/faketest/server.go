package faketest

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// Serve serves h over a real socket until the test ends and returns its URL.
func Serve(t testing.TB, h http.Handler) string {
	t.Helper()
	ts := httptest.NewServer(h)
	t.Cleanup(ts.Close)
	return ts.URL
}

// Client returns a client that never reuses a connection, so Go's transport never silently
// re-sends a request whose connection a fake dropped, and that gives up after 10 seconds.
func Client() *http.Client {
	return &http.Client{Transport: &http.Transport{DisableKeepAlives: true}, Timeout: 10 * time.Second}
}

// Reply is what a client saw.
type Reply struct {
	Status int
	Header http.Header
	Body   []byte
}

// Decode decodes the body into v, failing the test if it is not that JSON.
func (r Reply) Decode(t testing.TB, v any) {
	t.Helper()
	if err := json.Unmarshal(r.Body, v); err != nil {
		t.Fatalf("decoding %s: %v", r.Body, err)
	}
}

// JSON is the Content-Type of a request with body: application/json, or "" (none sent) when
// there is no body.
func JSON(body string) string {
	if body == "" {
		return ""
	}
	return "application/json"
}

// Do sends one request with body and reads the whole answer; the error is the transport's (a
// dropped connection shows there). headers are name, value pairs, and a pair whose value is
// empty is not sent, so a test passes "" for a header it leaves out.
func Do(c *http.Client, method, url, body string, headers ...string) (Reply, error) {
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		return Reply{}, err
	}
	for i := 0; i+1 < len(headers); i += 2 {
		if headers[i+1] != "" {
			req.Header.Set(headers[i], headers[i+1])
		}
	}
	resp, err := c.Do(req)
	if err != nil {
		return Reply{}, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return Reply{}, err
	}
	return Reply{Status: resp.StatusCode, Header: resp.Header, Body: b}, nil
}

// WaitFor polls cond until it holds, failing the test if it does not within d.
func WaitFor(t testing.TB, d time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("condition not met within %v", d)
		}
		time.Sleep(5 * time.Millisecond)
	}
}
