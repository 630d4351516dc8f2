package traffic_test

import (
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/actledger/actledger/mocksupplier/traffic"
)

// delivery is what a fake would record of an attempt.
type delivery struct {
	Event   string
	Attempt int
	Status  int
	Sig     string
}

func webhookTo(url string) traffic.Webhook[delivery] {
	return traffic.Webhook[delivery]{
		URL:      url,
		Body:     []byte(`{"id":"evt_1"}`),
		Headers:  func(n int, h http.Header) { h.Set("Signature", "sig-"+strconv.Itoa(n)) },
		Attempts: 3,
		Backoff:  5 * time.Millisecond,
		Delivery: func(a traffic.Attempt) delivery {
			return delivery{Event: "evt_1", Attempt: a.Number, Status: a.Status, Sig: a.Header.Get("Signature")}
		},
	}
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not met within 5s")
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestSenderRetriesUntilAcknowledgedAndSignsEachAttempt(t *testing.T) {
	t.Parallel()
	var calls atomic.Int32
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Content-Type") != "application/json" {
			t.Errorf("Content-Type = %q", r.Header.Get("Content-Type"))
		}
		if calls.Add(1) == 1 {
			w.WriteHeader(http.StatusServiceUnavailable)
		}
	}))
	t.Cleanup(ts.Close)
	s := traffic.NewSender[delivery](traffic.Config{})
	t.Cleanup(s.Close)

	s.Send(webhookTo(ts.URL))
	waitFor(t, func() bool { return len(s.Deliveries()) == 2 })
	want := []delivery{{"evt_1", 1, 503, "sig-1"}, {"evt_1", 2, 200, "sig-2"}}
	if got := s.Deliveries(); !slices.Equal(got, want) {
		t.Errorf("Deliveries = %+v, want %+v", got, want)
	}
}

func TestSenderResetAndCloseStopPendingDeliveries(t *testing.T) {
	t.Parallel()
	var calls atomic.Int32
	ts := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { calls.Add(1) }))
	t.Cleanup(ts.Close)
	s := traffic.NewSender[delivery](traffic.Config{})
	late := webhookTo(ts.URL)
	late.Delay = time.Hour

	s.Send(late)
	s.Reset()
	s.Send(webhookTo(ts.URL))
	waitFor(t, func() bool { return len(s.Deliveries()) == 1 })
	s.Send(late)
	s.Close()
	s.Close() // idempotent
	s.Send(webhookTo(ts.URL))
	if n := calls.Load(); n != 1 {
		t.Errorf("receiver got %d requests, want only the one sent between Reset and Close", n)
	}
}
