package zendesk

import (
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
	// DefaultEmail and DefaultAPIToken are the API-token credential a Server accepts when
	// Config leaves them empty: Basic authentication as "agent@example.com/token" with the
	// token as password.
	DefaultEmail    = "agent@example.com"
	DefaultAPIToken = "zd-api-token-actledger-mock"
	// DefaultOAuthToken is the OAuth access token a Server accepts as a bearer token when
	// Config.OAuthToken is empty.
	DefaultOAuthToken = "zd-oauth-token-actledger-mock"
	// DefaultKeyRetention is how long an Idempotency-Key is kept: Zendesk's keys expire after
	// two hours.
	DefaultKeyRetention = 2 * time.Hour
	// DefaultAccountID is the account_id of webhook events when Config.AccountID is 0.
	DefaultAccountID = 1
	// agentID is the user the credentials authenticate: requester and submitter of the
	// tickets created, author of their first comment.
	agentID = 1001
)

// maxBody bounds request bodies.
const maxBody = 1 << 20

// Config sets up a Server. The zero value accepts the Default credentials, keeps keys two hours,
// lists tickets at once, sends no webhooks and logs nothing.
type Config struct {
	// Email and APIToken make the API-token credential: "Authorization: Basic
	// base64({Email}/token:{APIToken})". Empty means DefaultEmail and DefaultAPIToken.
	Email    string
	APIToken string
	// OAuthToken is the OAuth access token accepted as "Authorization: Bearer <token>"; empty
	// means DefaultOAuthToken.
	OAuthToken string
	// LookupLag hides tickets younger than it from GET /api/v2/tickets.json?external_id=…
	// Zendesk documents no lag for this endpoint; a test sets one to check that a client does not
	// believe an early "absent".
	LookupLag time.Duration
	// KeyRetention is how long an Idempotency-Key and its stored answer are kept, from the first
	// request that used it; 0 means DefaultKeyRetention.
	KeyRetention time.Duration
	// AccountID is the account_id of webhook events; 0 means DefaultAccountID.
	AccountID int64
	// Webhook, when set, makes every new ticket send a signed ticket.created event.
	Webhook *Webhook
	// Now is the clock for timestamps, the lookup lag, key retention and webhook signatures; nil
	// means time.Now.
	Now func() time.Time
	// Logger receives one line per injected fault and per webhook delivery that was not
	// acknowledged; nil discards. No credential is ever logged.
	Logger *slog.Logger
}

// Server is the fake Zendesk Support API. It implements http.Handler and is safe for concurrent
// use.
type Server struct {
	log        *slog.Logger
	now        func() time.Time
	basicUser  string
	basicPass  string
	oauthToken string
	retention  time.Duration
	accountID  int64
	mux        *http.ServeMux
	requests   traffic.Log
	hooks      *traffic.Sender[Delivery]

	mu        sync.Mutex
	lag       time.Duration
	webhook   *Webhook
	tickets   []*Ticket
	byID      map[int64]*Ticket
	nextID    int64
	nextAudit int64
	keys      map[string]*keyEntry
	faults    fault.Queue[Fault]
}

var _ http.Handler = (*Server)(nil)

// New returns a Server ready to serve. It panics on an invalid Config (a negative duration, a
// webhook without URL or secret), which is a bug in the calling test.
func New(cfg Config) *Server {
	if err := cfg.validate(); err != nil {
		panic("zendesk: New: " + err.Error())
	}
	s := &Server{
		log:        cfg.Logger,
		now:        cfg.Now,
		basicUser:  cfg.Email,
		basicPass:  cfg.APIToken,
		oauthToken: cfg.OAuthToken,
		retention:  cfg.KeyRetention,
		accountID:  cfg.AccountID,
		lag:        cfg.LookupLag,
		webhook:    cloneWebhook(cfg.Webhook),
		byID:       make(map[int64]*Ticket),
		nextID:     1,
		nextAudit:  100001,
		keys:       make(map[string]*keyEntry),
	}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	if s.now == nil {
		s.now = time.Now
	}
	if s.basicUser == "" {
		s.basicUser = DefaultEmail
	}
	s.basicUser += "/token"
	if s.basicPass == "" {
		s.basicPass = DefaultAPIToken
	}
	if s.oauthToken == "" {
		s.oauthToken = DefaultOAuthToken
	}
	if s.retention == 0 {
		s.retention = DefaultKeyRetention
	}
	if s.accountID == 0 {
		s.accountID = DefaultAccountID
	}
	// A redirect is an answer other than 2xx, which the fake retries.
	s.hooks = traffic.NewSender[Delivery](traffic.Config{RedirectIsFailure: true, Now: s.now, Logger: s.log})
	s.routes()
	return s
}

func (c Config) validate() error {
	if c.LookupLag < 0 || c.KeyRetention < 0 {
		return fmt.Errorf("LookupLag and KeyRetention must not be negative")
	}
	if c.Webhook != nil {
		if err := c.Webhook.validate(); err != nil {
			return fmt.Errorf("webhook: %w", err)
		}
	}
	return nil
}

// routes serves each path with and without ".json": "Appending .json doesn't change the way the
// endpoint works in any way."
func (s *Server) routes() {
	s.mux = http.NewServeMux()
	s.mux.HandleFunc("POST /api/v2/tickets", s.handleCreate)
	s.mux.HandleFunc("POST /api/v2/tickets.json", s.handleCreate)
	s.mux.HandleFunc("GET /api/v2/tickets", s.handleList)
	s.mux.HandleFunc("GET /api/v2/tickets.json", s.handleList)
	s.mux.HandleFunc("GET /api/v2/tickets/{id}", s.handleShow)
	s.mux.HandleFunc("GET /api/v2/incremental/tickets/cursor", s.handleExport)
	s.mux.HandleFunc("GET /api/v2/incremental/tickets/cursor.json", s.handleExport)
	s.mux.HandleFunc("/", func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, http.StatusNotFound, errorBody{Error: "InvalidEndpoint", Description: "Not found"})
	})
}

// ServeHTTP records the request, checks its credential and serves it.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if err := s.requests.Read(w, r, maxBody, s.now().UTC()); err != nil {
		writeJSON(w, http.StatusBadRequest, errorBody{Error: "InvalidRequest", Description: "The request body could not be read."})
		return
	}
	if !s.authenticated(r) {
		// Zendesk's answer to a request it cannot authenticate.
		writeJSON(w, http.StatusUnauthorized, map[string]string{"error": "Couldn't authenticate you"})
		return
	}
	s.mux.ServeHTTP(w, r)
}

// authenticated accepts an API token ({email}/token:{api_token} in Basic authentication) or an
// OAuth access token as a bearer token.
func (s *Server) authenticated(r *http.Request) bool {
	if user, pass, ok := r.BasicAuth(); ok {
		return user == s.basicUser && pass == s.basicPass
	}
	if tok, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer "); ok {
		return strings.TrimSpace(tok) == s.oauthToken
	}
	return false
}

// Requests returns every request received so far, oldest first, including refused ones, with
// its headers (Authorization included) and its body (at most 1 MiB).
func (s *Server) Requests() []traffic.Request { return s.requests.All() }

// Effects reports how many tickets exist whose external_id is reference, whatever any client was
// told and regardless of the lookup lag: the number a test asserts "at most once" against.
func (s *Server) Effects(reference string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, t := range s.tickets {
		if t.ExternalID != nil && *t.ExternalID == reference {
			n++
		}
	}
	return n
}

// Tickets returns copies of the tickets whose external_id is reference, oldest first.
func (s *Server) Tickets(reference string) []Ticket {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []Ticket
	for _, t := range s.tickets {
		if t.ExternalID != nil && *t.ExternalID == reference {
			out = append(out, t.clone())
		}
	}
	return out
}

// SetLookupLag changes how long a new ticket stays out of the list by external_id.
func (s *Server) SetLookupLag(d time.Duration) {
	if d < 0 {
		panic("zendesk: SetLookupLag: negative lag")
	}
	s.mu.Lock()
	s.lag = d
	s.mu.Unlock()
}

// Close stops pending webhook deliveries and waits for them to end. Tickets created afterwards
// send no webhooks; the handler keeps serving. It is idempotent.
func (s *Server) Close() { s.hooks.Close() }

// errorBody is Zendesk's error shape: an error name, a description and, for validation errors,
// details per field.
type errorBody struct {
	Error       string                   `json:"error"`
	Description string                   `json:"description,omitempty"`
	Details     map[string][]fieldDetail `json:"details,omitempty"`
}

type fieldDetail struct {
	Description string `json:"description"`
	Error       string `json:"error"`
}

func writeJSON(w http.ResponseWriter, status int, v any) { writeRaw(w, status, mustJSON(v)) }

func writeRaw(w http.ResponseWriter, status int, body []byte) {
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.WriteHeader(status)
	_, _ = w.Write(body)
}

func mustJSON(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(fmt.Sprintf("zendesk: encoding %T: %v", v, err))
	}
	return b
}
