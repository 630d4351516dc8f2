package traffic

import (
	"bytes"
	"cmp"
	"context"
	"io"
	"log/slog"
	"net/http"
	"sync"
	"time"
)

// DefaultBackoff is the wait before the first retry of a Webhook whose Backoff is 0.
const DefaultBackoff = 100 * time.Millisecond

// maxAnswer bounds how much of a receiver's answer is read (and discarded).
const maxAnswer = 1 << 20

// Config sets up a Sender.
type Config struct {
	// Timeout bounds each attempt, the receiver's answer included; 0 means 5 seconds.
	Timeout time.Duration
	// RedirectIsFailure makes a redirect the answer to an attempt, which is then not
	// acknowledged, as a supplier does that counts a 3xx as a failed delivery; otherwise
	// redirects are followed.
	RedirectIsFailure bool
	// Now stamps each attempt; nil means time.Now.
	Now func() time.Time
	// Logger receives one warning per attempt that was not acknowledged; nil discards.
	Logger *slog.Logger
}

// Webhook is one event to deliver to one receiver.
type Webhook[D any] struct {
	// URL receives the POST requests.
	URL string
	// Body is the event, JSON: every attempt sends the same bytes, as Content-Type
	// application/json.
	Body []byte
	// Headers sets the headers of attempt n (counted from 1) besides Content-Type: the
	// signature, made when the attempt is sent, and whatever else the supplier sends. Nil sends
	// no others.
	Headers func(n int, h http.Header)
	// Delay is how long after Send the first attempt is made.
	Delay time.Duration
	// Attempts is how many times the event is sent in all while the receiver does not answer
	// 2xx; 0 means once.
	Attempts int
	// Backoff is the wait before the first retry, doubling for each further one; 0 means
	// DefaultBackoff.
	Backoff time.Duration
	// Delivery makes the fake's record of an attempt; it is required. Deliveries calls it each
	// time, with a copy of the attempt of its own, so no caller shares a header or a body with
	// another.
	Delivery func(Attempt) D
	// LogAttrs, when set, names the event in the warning logged for an attempt that was not
	// acknowledged; the Sender adds the attempt number, the status and the error.
	LogAttrs func(Attempt) []any
}

// Attempt is one attempt to deliver a Webhook: what was sent and what the receiver answered.
type Attempt struct {
	URL string
	// Number counts from 1 for each Webhook.
	Number int
	// Header and Body are the request as sent.
	Header http.Header
	Body   []byte
	// Status is the receiver's HTTP status, 0 when it gave none (Err says why).
	Status int
	Err    string
	At     time.Time
}

func (a Attempt) clone() Attempt {
	a.Header = a.Header.Clone()
	a.Body = bytes.Clone(a.Body)
	return a
}

// acknowledged reports whether the receiver took the event: a 2xx answer.
func (a Attempt) acknowledged() bool { return a.Err == "" && a.Status >= 200 && a.Status < 300 }

// Sender delivers a fake's webhooks, each in a goroutine of its own, and records every attempt,
// to be read back as D, the fake's Delivery type. It is safe for concurrent use; a fake may
// call Send while it holds its own mutex.
type Sender[D any] struct {
	client *http.Client
	now    func() time.Time
	log    *slog.Logger

	mu       sync.Mutex
	attempts []recorded[D]
	gen      uint64        // bumped by Reset; attempts of an older generation are not recorded
	stop     chan struct{} // closed by Reset and Close to stop pending deliveries
	closed   bool
	pending  sync.WaitGroup
}

// recorded is an attempt and the Webhook's way of turning it into a D.
type recorded[D any] struct {
	attempt  Attempt
	delivery func(Attempt) D
}

// NewSender returns a Sender ready to send.
func NewSender[D any](cfg Config) *Sender[D] {
	s := &Sender[D]{
		// Its own transport, one connection per attempt: a kept-alive
		// connection of the process's shared transport may point at a
		// receiver since closed whose port a new one got (a test's
		// server), and an attempt on it would fail without reaching
		// anyone.
		client: &http.Client{Timeout: cmp.Or(cfg.Timeout, 5*time.Second), Transport: &http.Transport{DisableKeepAlives: true}},
		now:    cfg.Now,
		log:    cfg.Logger,
		stop:   make(chan struct{}),
	}
	if cfg.RedirectIsFailure {
		s.client.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	}
	if s.now == nil {
		s.now = time.Now
	}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	return s
}

// Send starts the delivery of wh and returns at once: after wh.Delay the event is sent,
// retried with a doubling backoff while the receiver does not answer 2xx, until it is
// acknowledged, its attempts run out, or Reset or Close stops it. Once the Sender is closed,
// Send sends nothing.
func (s *Sender[D]) Send(wh Webhook[D]) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return
	}
	gen, stop := s.gen, s.stop
	s.pending.Add(1)
	go func() {
		defer s.pending.Done()
		s.deliver(wh, gen, stop)
	}()
}

// Deliveries returns every attempt so far, oldest first, each as its Webhook's Delivery made it;
// nil when there were none.
func (s *Sender[D]) Deliveries() []D {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.attempts) == 0 {
		return nil
	}
	out := make([]D, len(s.attempts))
	for i, r := range s.attempts {
		out[i] = r.delivery(r.attempt.clone())
	}
	return out
}

// Reset stops pending deliveries and forgets every attempt recorded; webhooks sent afterwards
// are delivered (unless the Sender is closed). It does not wait for the stopped deliveries to
// end: an attempt they were making is not recorded.
func (s *Sender[D]) Reset() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.attempts = nil
	s.gen++
	if !s.closed {
		close(s.stop)
		s.stop = make(chan struct{})
	}
}

// Close stops pending deliveries and waits for them to end; webhooks sent afterwards are not
// delivered. It is idempotent.
func (s *Sender[D]) Close() {
	s.mu.Lock()
	if !s.closed {
		s.closed = true
		close(s.stop)
	}
	s.mu.Unlock()
	s.pending.Wait()
}

func (s *Sender[D]) deliver(wh Webhook[D], gen uint64, stop <-chan struct{}) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		select {
		case <-stop:
			cancel()
		case <-ctx.Done():
		}
	}()
	backoff := wh.Backoff
	if backoff == 0 {
		backoff = DefaultBackoff
	}
	pause := wh.Delay
	for n := 1; n <= max(wh.Attempts, 1); n++ {
		if !sleep(ctx, pause) {
			return
		}
		pause = backoff << (n - 1)
		a := Attempt{URL: wh.URL, Number: n, Header: http.Header{}, Body: wh.Body}
		a.Header.Set("Content-Type", "application/json")
		if wh.Headers != nil {
			wh.Headers(n, a.Header)
		}
		var err error
		a.Status, err = s.post(ctx, wh.URL, a.Header, wh.Body)
		if ctx.Err() != nil {
			return
		}
		if err != nil {
			a.Err = err.Error()
		}
		a.At = s.now().UTC()
		s.mu.Lock()
		if s.gen == gen {
			s.attempts = append(s.attempts, recorded[D]{attempt: a, delivery: wh.Delivery})
		}
		s.mu.Unlock()
		if a.acknowledged() {
			return
		}
		var attrs []any
		if wh.LogAttrs != nil {
			attrs = wh.LogAttrs(a)
		}
		s.log.WarnContext(ctx, "webhook not acknowledged",
			append(attrs, "attempt", n, "status", a.Status, "error", a.Err)...)
	}
}

// post sends one attempt and returns the receiver's status.
func (s *Sender[D]) post(ctx context.Context, url string, header http.Header, body []byte) (int, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return 0, err
	}
	req.Header = header.Clone()
	resp, err := s.client.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, maxAnswer))
	return resp.StatusCode, nil
}

// sleep waits d, reporting false if ctx ended first.
func sleep(ctx context.Context, d time.Duration) bool {
	if d > 0 {
		select {
		case <-time.After(d):
		case <-ctx.Done():
		}
	}
	return ctx.Err() == nil
}
