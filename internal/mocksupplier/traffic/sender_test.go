package traffic_test

import (
	"net/http"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/actledger/actledger/internal/mocksupplier/internal/faketest"
	"github.com/actledger/actledger/internal/mocksupplier/traffic"
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

func TestSenderRetriesUntilAcknowledgedAndSignsEachAttempt(t *testing.T) {
	t.Parallel()
	url, got := faketest.Receiver(t, http.StatusOK, http.StatusServiceUnavailable)
	s := traffic.NewSender[delivery](traffic.Config{})
	t.Cleanup(s.Close)

	s.Send(webhookTo(url))
	for range 2 {
		if r := faketest.Next(t, got); r.Header.Get("Content-Type") != "application/json" || string(r.Body) != `{"id":"evt_1"}` {
			t.Errorf("received %v %s, want the JSON body", r.Header, r.Body)
		}
	}
	faketest.WaitFor(t, 5*time.Second, func() bool { return len(s.Deliveries()) == 2 })
	want := []delivery{{"evt_1", 1, 503, "sig-1"}, {"evt_1", 2, 200, "sig-2"}}
	if got := s.Deliveries(); !slices.Equal(got, want) {
		t.Errorf("Deliveries = %+v, want %+v", got, want)
	}
}

func TestSenderResetAndCloseStopPendingDeliveries(t *testing.T) {
	t.Parallel()
	url, got := faketest.Receiver(t, http.StatusOK)
	s := traffic.NewSender[delivery](traffic.Config{})
	late := webhookTo(url)
	late.Delay = time.Hour

	s.Send(late)
	s.Reset()
	s.Send(webhookTo(url))
	faketest.Next(t, got)
	faketest.WaitFor(t, 5*time.Second, func() bool { return len(s.Deliveries()) == 1 })
	s.Send(late)
	s.Close()
	s.Close() // idempotent
	s.Send(webhookTo(url))
	if ds := s.Deliveries(); len(ds) != 1 {
		t.Errorf("Deliveries = %+v, want only the one sent between Reset and Close", ds)
	}
	select {
	case r := <-got:
		t.Errorf("a stopped webhook was sent: %s", r.Body)
	default:
	}
}
