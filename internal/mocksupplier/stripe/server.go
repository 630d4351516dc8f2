package stripe

import (
	"crypto/rand"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/actledger/actledger/internal/mocksupplier/fault"
	"github.com/actledger/actledger/internal/mocksupplier/traffic"
)

// Defaults for the zero Config.
const (
	// DefaultAPIKey is the secret key a Server requires when Config.APIKey is empty. Like every
	// test-mode key it starts with sk_test_.
	DefaultAPIKey = "sk_test_actledgermock4242"
	// DefaultKeyRetention is how long an Idempotency-Key is kept: Stripe removes keys once they
	// are at least 24 hours old.
	DefaultKeyRetention = 24 * time.Hour
	// APIVersion is the api_version every event carries. The fake renders all objects in one
	// shape whatever Stripe-Version header a request sends.
	APIVersion = "2025-10-29.clover"
)

// maxBody bounds request bodies.
const maxBody = 1 << 20

// Config sets up a Server. The zero value is a well-behaved test-mode account: DefaultAPIKey,
// keys kept 24 hours, search results at once, no webhooks, no logs.
type Config struct {
	// APIKey is the secret key every request must present, as "Authorization: Bearer <key>" or
	// as the username of HTTP Basic authentication (the password is ignored). Empty means
	// DefaultAPIKey. A key starting with sk_live_ makes every object livemode.
	APIKey string
	// SearchLag hides PaymentIntents younger than it from GET /v1/payment_intents/search: Stripe
	// documents that search is not read-after-write. Retrieval by id and the list of refunds are
	// consistent, as Stripe's list and retrieve APIs are.
	SearchLag time.Duration
	// KeyRetention is how long an Idempotency-Key and its stored answer are kept, counted from
	// the first request that used it; 0 means DefaultKeyRetention. A key used again after that
	// is a new request, as at Stripe once a key is pruned.
	KeyRetention time.Duration
	// Webhooks are the endpoints events are sent to; see WebhookEndpoint.
	Webhooks []WebhookEndpoint
	// Now is the clock for created timestamps, the search lag, key retention and webhook
	// signatures; nil means time.Now. Tests move it to cross the lag without sleeping.
	Now func() time.Time
	// Logger receives one line per injected fault and per webhook delivery that was not
	// acknowledged; nil discards. No credential is ever logged.
	Logger *slog.Logger
}

// Server is the fake Stripe API. It implements http.Handler and is safe for concurrent use.
type Server struct {
	log       *slog.Logger
	now       func() time.Time
	apiKey    string
	livemode  bool
	retention time.Duration
	mux       *http.ServeMux
	requests  traffic.Log
	hooks     *traffic.Sender[Delivery]

	mu         sync.Mutex
	lag        time.Duration
	endpoints  []WebhookEndpoint
	intents    []*PaymentIntent
	intentByID map[string]*PaymentIntent
	refunds    []*Refund
	refundByID map[string]*Refund
	charges    map[string]*charge
	keys       map[string]*keyEntry
	faults     fault.Queue[Fault]
	events     []Event
}

var _ http.Handler = (*Server)(nil)

// New returns a Server ready to serve. It panics on an invalid Config (a negative duration, a
// webhook endpoint without a URL or secret), which is a bug in the calling test.
func New(cfg Config) *Server {
	if err := cfg.validate(); err != nil {
		panic("stripe: New: " + err.Error())
	}
	s := &Server{
		log:        cfg.Logger,
		now:        cfg.Now,
		apiKey:     cfg.APIKey,
		retention:  cfg.KeyRetention,
		lag:        cfg.SearchLag,
		endpoints:  cloneEndpoints(cfg.Webhooks),
		intentByID: make(map[string]*PaymentIntent),
		refundByID: make(map[string]*Refund),
		charges:    make(map[string]*charge),
		keys:       make(map[string]*keyEntry),
	}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	if s.now == nil {
		s.now = time.Now
	}
	if s.apiKey == "" {
		s.apiKey = DefaultAPIKey
	}
	if s.retention == 0 {
		s.retention = DefaultKeyRetention
	}
	s.livemode = strings.HasPrefix(s.apiKey, "sk_live_")
	// Stripe counts a 3xx as a failed delivery.
	s.hooks = traffic.NewSender[Delivery](traffic.Config{RedirectIsFailure: true, Now: s.now, Logger: s.log})
	s.routes()
	return s
}

func (c Config) validate() error {
	if c.SearchLag < 0 {
		return fmt.Errorf("SearchLag must not be negative, got %s", c.SearchLag)
	}
	if c.KeyRetention < 0 {
		return fmt.Errorf("KeyRetention must not be negative, got %s", c.KeyRetention)
	}
	for i, ep := range c.Webhooks {
		if err := ep.validate(); err != nil {
			return fmt.Errorf("webhook endpoint %d: %w", i, err)
		}
	}
	return nil
}

func (s *Server) routes() {
	s.mux = http.NewServeMux()
	s.mux.HandleFunc("POST /v1/payment_intents", s.handleCreateIntent)
	s.mux.HandleFunc("GET /v1/payment_intents", s.handleListIntents)
	s.mux.HandleFunc("GET /v1/payment_intents/search", s.handleSearchIntents)
	s.mux.HandleFunc("GET /v1/payment_intents/{id}", s.handleGetIntent)
	s.mux.HandleFunc("POST /v1/refunds", s.handleCreateRefund)
	s.mux.HandleFunc("GET /v1/refunds", s.handleListRefunds)
	s.mux.HandleFunc("GET /v1/refunds/{id}", s.handleGetRefund)
	s.mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, http.StatusNotFound, ErrorObject{
			Type:    "invalid_request_error",
			Message: fmt.Sprintf("Unrecognized request URL (%s: %s).", r.Method, r.URL.Path),
		})
	})
}

// ServeHTTP records the request, checks its credential and serves it.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if err := s.requests.Read(w, r, maxBody, s.now().UTC()); err != nil {
		writeError(w, http.StatusBadRequest, ErrorObject{Type: "invalid_request_error", Message: "The request body could not be read."})
		return
	}
	if msg, ok := s.authenticate(r); !ok {
		writeError(w, http.StatusUnauthorized, ErrorObject{Type: "invalid_request_error", Message: msg})
		return
	}
	s.mux.ServeHTTP(w, r)
}

// authenticate accepts the configured key as a bearer token or as the Basic username. It answers
// the 401 messages Stripe answers: one for a request without a key, one for a wrong key, which
// names the key masked, never in full.
func (s *Server) authenticate(r *http.Request) (string, bool) {
	var key string
	if user, _, ok := r.BasicAuth(); ok {
		key = user
	} else if v, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer "); ok {
		key = strings.TrimSpace(v)
	}
	switch {
	case key == "":
		return "You did not provide an API key. You need to provide your API key in the Authorization header, " +
			"using Bearer auth (e.g. 'Authorization: Bearer YOUR_SECRET_KEY'). See https://stripe.com/docs/api#authentication " +
			"for details, or we can help at https://support.stripe.com/.", false
	case key != s.apiKey:
		return "Invalid API Key provided: " + mask(key), false
	}
	return "", true
}

// mask keeps a key's mode prefix and its last four characters.
func mask(key string) string {
	prefix := ""
	for _, p := range []string{"sk_test_", "sk_live_", "rk_test_", "rk_live_", "pk_test_", "pk_live_"} {
		if strings.HasPrefix(key, p) {
			prefix = p
			break
		}
	}
	rest := key[len(prefix):]
	if len(rest) <= 4 {
		return prefix + strings.Repeat("*", len(rest))
	}
	return prefix + strings.Repeat("*", len(rest)-4) + rest[len(rest)-4:]
}

// Requests returns every request received so far, oldest first, including refused ones, with
// its headers and its body (at most 1 MiB), so that a test can check what was sent, and what was
// not: a credential sent to the wrong host shows up in a Header.
func (s *Server) Requests() []traffic.Request { return s.requests.All() }

// Effects reports how many PaymentIntents and Refunds exist whose metadata["reference"] is
// reference, whatever any client was told and regardless of the search lag: the ground truth a
// test asserts "at most once" against. A PaymentIntent whose confirmation was declined (fault
// CardDeclined) exists and counts, as it does at Stripe; PaymentIntents tells its status.
func (s *Server) Effects(reference string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, pi := range s.intents {
		if pi.Metadata["reference"] == reference {
			n++
		}
	}
	for _, re := range s.refunds {
		if re.Metadata["reference"] == reference {
			n++
		}
	}
	return n
}

// PaymentIntents returns copies of the PaymentIntents whose metadata["reference"] is reference,
// oldest first.
func (s *Server) PaymentIntents(reference string) []PaymentIntent {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []PaymentIntent
	for _, pi := range s.intents {
		if pi.Metadata["reference"] == reference {
			out = append(out, pi.clone())
		}
	}
	return out
}

// Refunds returns copies of the Refunds whose metadata["reference"] is reference, oldest first.
func (s *Server) Refunds(reference string) []Refund {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []Refund
	for _, re := range s.refunds {
		if re.Metadata["reference"] == reference {
			out = append(out, re.clone())
		}
	}
	return out
}

// SetSearchLag changes how long a new PaymentIntent stays out of search results.
func (s *Server) SetSearchLag(d time.Duration) {
	if d < 0 {
		panic("stripe: SetSearchLag: negative lag")
	}
	s.mu.Lock()
	s.lag = d
	s.mu.Unlock()
}

// Close stops pending webhook deliveries and waits for them to end. Objects created afterwards
// send no webhooks; the handler keeps serving. It is idempotent.
func (s *Server) Close() { s.hooks.Close() }

// ErrorObject is Stripe's error object, the value of "error" in every error answer and the
// last_payment_error of a PaymentIntent.
type ErrorObject struct {
	Type          string         `json:"type"`
	Code          string         `json:"code,omitempty"`
	DeclineCode   string         `json:"decline_code,omitempty"`
	Message       string         `json:"message"`
	Param         string         `json:"param,omitempty"`
	PaymentIntent *PaymentIntent `json:"payment_intent,omitempty"`
}

type errorBody struct {
	Error ErrorObject `json:"error"`
}

func errorJSON(e ErrorObject) []byte { return mustJSON(errorBody{Error: e}) }

func writeError(w http.ResponseWriter, status int, e ErrorObject) {
	writeRaw(w, status, errorJSON(e))
}

func writeJSON(w http.ResponseWriter, status int, v any) { writeRaw(w, status, mustJSON(v)) }

func writeRaw(w http.ResponseWriter, status int, body []byte) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(body)
}

func mustJSON(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(fmt.Sprintf("stripe: encoding %T: %v", v, err))
	}
	return b
}

// newID returns prefix followed by 24 random characters, like Stripe's object ids.
func newID(prefix string) string {
	return prefix + rand.Text()[:24]
}
