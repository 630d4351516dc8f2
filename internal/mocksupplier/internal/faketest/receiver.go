package faketest

import (
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"
)

// Received is one webhook request as a Receiver got it.
type Received struct {
	At     time.Time
	Header http.Header
	Body   []byte
}

// Receiver starts a webhook endpoint for the test: it answers the statuses of answers in turn,
// then then to every later request, and passes each request it gets to the channel it returns
// with its URL.
func Receiver(t testing.TB, then int, answers ...int) (url string, got <-chan Received) {
	t.Helper()
	ch := make(chan Received, 64)
	var mu sync.Mutex
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		ch <- Received{At: time.Now(), Header: r.Header.Clone(), Body: body}
		mu.Lock()
		status := then
		if len(answers) > 0 {
			status, answers = answers[0], answers[1:]
		}
		mu.Unlock()
		w.WriteHeader(status)
	}))
	t.Cleanup(ts.Close)
	return ts.URL, ch
}

// Next returns the next request got, failing the test if none comes within 5 seconds.
func Next(t testing.TB, got <-chan Received) Received {
	t.Helper()
	select {
	case r := <-got:
		return r
	case <-time.After(5 * time.Second):
		t.Fatal("no webhook within 5s")
		return Received{}
	}
}
