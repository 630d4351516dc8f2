package dispatcher_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/actledger/actledger/internal/mocksupplier"
	"github.com/actledger/actledger/internal/testpipeline"
	"github.com/actledger/actledger/ledger"
	"github.com/actledger/actledger/provider"
)

// forgetfulSupplier keeps an idempotency key for retention after it first
// saw it, and then forgets it: a request it works on later with the same
// key makes a new order. Its first create commits and loses the answer;
// it starts work on every later create only after processing (a queue in
// front of it), well inside the caller's timeout.
type forgetfulSupplier struct {
	retention, processing time.Duration

	mu     sync.Mutex
	calls  int
	seen   map[string]time.Time // key → first seen
	stored map[string]string    // key → the first order's id
	orders map[string][]string  // client_reference → order ids
}

func (s *forgetfulSupplier) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method == http.MethodGet {
		s.mu.Lock()
		var found []map[string]string
		ref := r.URL.Query().Get("client_reference")
		for _, id := range s.orders[ref] {
			found = append(found, map[string]string{"id": id, "client_reference": ref})
		}
		s.mu.Unlock()
		_ = json.NewEncoder(w).Encode(append([]map[string]string{}, found...))
		return
	}
	var body struct {
		Reference string `json:"client_reference"`
	}
	if err := json.NewDecoder(r.Body).Decode(&body); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	key := r.Header.Get("Idempotency-Key")
	s.mu.Lock()
	s.calls++
	first := s.calls == 1
	s.mu.Unlock()
	if !first {
		time.Sleep(s.processing)
	}
	s.mu.Lock()
	now := time.Now()
	id, kept := s.stored[key]
	if !kept || now.Sub(s.seen[key]) >= s.retention {
		id = fmt.Sprintf("ord_%d", s.calls)
		s.orders[body.Reference] = append(s.orders[body.Reference], id)
		s.seen[key], s.stored[key] = now, id
	}
	s.mu.Unlock()
	if first {
		// Committed; the answer is lost.
		conn, _, err := w.(http.Hijacker).Hijack()
		if err == nil {
			_ = conn.Close()
		}
		return
	}
	w.WriteHeader(http.StatusCreated)
	_ = json.NewEncoder(w).Encode(map[string]string{"id": id})
}

func (s *forgetfulSupplier) Orders(reference string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.orders[reference])
}

// A resend relies on the supplier's idempotency contract only if the
// supplier can still know the key when the request reaches it, and a
// request may take the call's full timeout to do so. A resend decided just
// inside retention, worked on just past it, would make a second order; the
// lookup settles the unknown outcome instead.
func TestResendIsNotMadeWhenRetentionCouldEndBeforeItArrives(t *testing.T) {
	t.Parallel()
	sup := &forgetfulSupplier{retention: 600 * time.Millisecond, processing: 700 * time.Millisecond,
		seen: map[string]time.Time{}, stored: map[string]string{}, orders: map[string][]string{}}
	srv := httptest.NewServer(sup)
	t.Cleanup(srv.Close)
	p := testpipeline.New(t, testpipeline.Options{
		Idempotency: true, Retention: sup.retention, LookupLag: 0, Mode: mocksupplier.Honour,
		Timeout: time.Second, Lease: 3 * time.Second,
		Providers: func(real provider.Provider) provider.Provider {
			cfg := *real.(*provider.HTTP).Config()
			cfg.BaseURL = srv.URL
			return provider.NewHTTP(&cfg, provider.HTTPOptions{})
		},
	})
	op := p.Enqueue("po-1", `{"sku":"A-1"}`)
	p.Start(1)
	done := p.WaitStatus(op, ledger.StatusSucceeded, settle)
	if got := sup.Orders(op.ExternalKey); got != 1 {
		t.Errorf("orders at the supplier %d, want 1; history:\n%s", got, p.History(op))
	}
	if done.ProviderReference == nil || *done.ProviderReference != "ord_1" {
		t.Errorf("reference %v, want ord_1; history:\n%s", done.ProviderReference, p.History(op))
	}
}
