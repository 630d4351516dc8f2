package mocksupplier

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"sync"
	"time"

	"github.com/actledger/actledger/internal/mocksupplier/fault"
	"github.com/actledger/actledger/internal/mocksupplier/traffic"
)

// Mode says whether the supplier honours Idempotency-Key headers.
type Mode string

const (
	// Honour stores the first response per Idempotency-Key and replays it, like Stripe. The
	// default.
	Honour Mode = "honour"
	// Ignore disregards the header, so every POST creates an order: the supplier a naive
	// retry duplicates orders at.
	Ignore Mode = "ignore"
)

func (m Mode) validate() error {
	switch m {
	case Honour, Ignore:
		return nil
	}
	return fmt.Errorf("unknown idempotency mode %q (want %q or %q)", m, Honour, Ignore)
}

// Config sets up a Server. The zero value is a well-behaved supplier: keys honoured, no lookup
// lag, no webhooks, no logs.
type Config struct {
	// Idempotency is Honour (the default when empty) or Ignore.
	Idempotency Mode
	// LookupLag hides orders younger than it from GET /v1/orders?client_reference=…, to model a
	// supplier whose search index trails its writes.
	LookupLag time.Duration
	// Webhook, when set, makes every new order send a signed order.created event.
	Webhook *WebhookConfig
	// Logger receives one line per injected fault and per webhook failure (orders at debug
	// level); nil discards.
	Logger *slog.Logger
	// Now is the clock for created_at, the lookup lag and webhook signatures; nil means
	// time.Now. Tests move it to cross the lag without sleeping.
	Now func() time.Time
	// DataFile, when set, makes orders and their idempotency records outlive the process: Open
	// loads them from this file (creating it if it does not exist) and every new order is
	// appended to it and fsynced before it counts as committed, that is before it is visible,
	// its webhook is scheduled or any answer is sent, so an order whose response a
	// DropAfterCommit fault lost is still there after a restart, and so is the answer a repeat
	// of its Idempotency-Key gets. Only orders and keys are kept: recorded requests, lookups and
	// deliveries, queued faults, pending webhooks and settings changed at run time are not.
	// Empty keeps everything in memory, with no file I/O on any path. One process per file.
	DataFile string
}

// Server is the mock supplier. It implements http.Handler; its methods are the in-process view
// of the same state the admin API exposes. It is safe for concurrent use.
type Server struct {
	log     *slog.Logger
	now     func() time.Time
	initial Config // restored by Reset
	mux     *http.ServeMux
	hooks   *traffic.Sender[Delivery]

	mu       sync.Mutex
	mode     Mode
	lag      time.Duration
	webhook  *WebhookConfig
	data     *orderLog // nil without Config.DataFile
	orders   orderStore
	keys     map[string]*keyEntry
	faults   fault.Queues[Fault] // per reference, and for the whole run
	requests map[string][]time.Time
	lookups  map[string][]time.Time
	// lookupDelay holds every answer to a lookup by reference.
	lookupDelay time.Duration
	statement   statementState
}

var _ http.Handler = (*Server)(nil)

// New returns a Server ready to serve. It panics where Open would return an error: an unknown
// Config.Idempotency, which is a bug in the caller, or a Config.DataFile it cannot load, so a
// caller that sets DataFile should call Open.
func New(cfg Config) *Server {
	s, err := Open(cfg)
	if err != nil {
		panic("mocksupplier: New: " + err.Error())
	}
	return s
}

// Open returns a Server ready to serve, with the orders and idempotency records of
// Config.DataFile when it is set. An unknown Config.Idempotency, or a data file it cannot open
// or read in full, is an error naming the problem (and the file); it never starts with part of
// the file.
func Open(cfg Config) (*Server, error) {
	if cfg.Idempotency == "" {
		cfg.Idempotency = Honour
	}
	if err := cfg.Idempotency.validate(); err != nil {
		return nil, err
	}
	if cfg.Webhook != nil {
		wh := *cfg.Webhook
		cfg.Webhook = &wh
	}
	s := &Server{
		log:     cfg.Logger,
		now:     cfg.Now,
		initial: cfg,
	}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	if s.now == nil {
		s.now = time.Now
	}
	s.hooks = traffic.NewSender[Delivery](traffic.Config{Now: s.now, Logger: s.log})
	s.resetLocked()
	if cfg.DataFile != "" {
		data, recs, err := openOrderLog(cfg.DataFile)
		if err != nil {
			return nil, err
		}
		s.data = data
		s.load(recs)
	}
	s.routes()
	return s, nil
}

func (s *Server) routes() {
	s.mux = http.NewServeMux()
	s.mux.HandleFunc("POST /v1/orders", s.handleCreate)
	s.mux.HandleFunc("GET /v1/orders", s.handleList)
	s.mux.HandleFunc("GET /v1/orders/{id}", s.handleGet)
	s.mux.HandleFunc("GET /v1/statement", s.handleStatement)
	s.mux.HandleFunc("GET /admin/config", s.handleGetConfig)
	s.mux.HandleFunc("POST /admin/config", s.handleSetConfig)
	s.mux.HandleFunc("POST /admin/faults", s.handleSetFaults)
	s.mux.HandleFunc("GET /admin/orders", s.handleAdminOrders)
	s.mux.HandleFunc("POST /admin/orders", s.handleAdminCreate)
	s.mux.HandleFunc("GET /admin/requests", s.handleAdminRequests)
	s.mux.HandleFunc("GET /admin/deliveries", s.handleAdminDeliveries)
	s.mux.HandleFunc("POST /admin/reset", s.handleReset)
	s.mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
	})
}

// ServeHTTP serves the supplier API, the admin API and /healthz.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.mux.ServeHTTP(w, r)
}

// SetIdempotency switches between honouring and ignoring Idempotency-Key from the next request
// on; keys already stored are kept. "" means Honour; an unknown mode panics.
func (s *Server) SetIdempotency(m Mode) {
	if m == "" {
		m = Honour
	}
	if err := m.validate(); err != nil {
		panic("mocksupplier: SetIdempotency: " + err.Error())
	}
	s.mu.Lock()
	s.mode = m
	s.mu.Unlock()
}

// SetLookupLag changes how long a new order stays invisible to lookups by reference.
func (s *Server) SetLookupLag(d time.Duration) {
	s.mu.Lock()
	s.lag = d
	s.mu.Unlock()
}

// SetLookupDelay makes every lookup by reference answer d late, with the orders visible when it
// arrived: a slow search API whose answer may be stale by the time it is read.
func (s *Server) SetLookupDelay(d time.Duration) {
	s.mu.Lock()
	s.lookupDelay = d
	s.mu.Unlock()
}

// LookupRequests returns when each lookup by reference (GET /v1/orders?client_reference=…)
// arrived, oldest first.
func (s *Server) LookupRequests(reference string) []time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]time.Time(nil), s.lookups[reference]...)
}

// SetWebhook sets where order.created events go for orders created from now on; nil turns
// webhooks off. Deliveries already scheduled keep the settings they were scheduled with.
func (s *Server) SetWebhook(wh *WebhookConfig) {
	if wh != nil {
		c := *wh
		wh = &c
	}
	s.mu.Lock()
	s.webhook = wh
	s.mu.Unlock()
}

// Orders reports how many orders really exist for reference, whatever any client was told and
// regardless of the lookup lag: the number a test asserts "at most once" against.
func (s *Server) Orders(reference string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.orders.byRef[reference])
}

// TotalOrders reports how many orders exist across all references.
func (s *Server) TotalOrders() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.orders.all)
}

// CreateRequests returns when each POST /v1/orders for reference arrived, oldest first,
// including replays and refused requests (only malformed bodies, whose reference is unknown, are
// not counted), so a test can assert that nothing was sent before a lag passed, or how many
// times a client really sent.
func (s *Server) CreateRequests(reference string) []time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]time.Time(nil), s.requests[reference]...)
}

// Reset forgets every order, stored idempotency key, queued fault, recorded request and
// delivery, stops pending webhook deliveries, and restores the Config given to New. With a data
// file it empties the file too; if that fails, the error is logged, POST /admin/reset answers
// it, and every later order is refused (503) rather than kept in memory only.
func (s *Server) Reset() {
	_ = s.reset()
}

func (s *Server) reset() error {
	var err error
	if s.data != nil {
		s.data.mu.Lock()
		defer s.data.mu.Unlock()
		if err = s.data.truncateLocked(); err != nil {
			s.log.Error("reset could not empty the data file", "error", err)
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.hooks.Reset()
	s.resetLocked()
	return err
}

func (s *Server) resetLocked() {
	s.mode = s.initial.Idempotency
	s.lag = s.initial.LookupLag
	s.webhook = s.initial.Webhook
	s.orders = newOrderStore()
	s.keys = make(map[string]*keyEntry)
	s.faults.Clear()
	s.requests = make(map[string][]time.Time)
	s.lookups = make(map[string][]time.Time)
	s.lookupDelay = 0
	s.statement = statementState{}
}

// Close stops pending webhook deliveries, waits for their goroutines to end, and closes the data
// file. Orders created afterwards send no webhooks, and with a data file there are none: creates
// are refused (503). It is idempotent; the handler keeps serving.
func (s *Server) Close() {
	s.hooks.Close()
	if s.data != nil {
		if err := s.data.close(); err != nil {
			s.log.Error("closing the data file", "error", err)
		}
	}
}

// errorBody is every error answer: {"error":{"code","message"}}, the shape actledger uses too.
type errorBody struct {
	Error errorDetail `json:"error"`
}

type errorDetail struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

func errorJSON(code, message string) []byte {
	b, _ := json.Marshal(errorBody{Error: errorDetail{Code: code, Message: message}})
	return b
}

func writeError(w http.ResponseWriter, status int, code, message string) {
	writeRaw(w, status, errorJSON(code, message))
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		writeError(w, http.StatusInternalServerError, "encode", err.Error())
		return
	}
	writeRaw(w, status, b)
}

func writeRaw(w http.ResponseWriter, status int, body []byte) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(body)
}
