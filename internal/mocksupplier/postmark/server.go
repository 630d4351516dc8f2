package postmark

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

// DefaultServerToken is the server API token a Server built with an empty Config.ServerToken
// accepts.
const DefaultServerToken = "postmark-fake-server-token"

// Config sets up a Server. The zero value accepts DefaultServerToken, has no inactive recipients,
// a message search that never lags, and no logs.
type Config struct {
	// ServerToken is the only server API token the API accepts, in X-Postmark-Server-Token. The
	// header's value is compared without regard to case, as Postmark documents. Empty means
	// DefaultServerToken.
	ServerToken string
	// InactiveRecipients are addresses Postmark has deactivated (after a hard bounce, a spam
	// complaint or a manual suppression): a message to any of them is refused with 422 and
	// ErrorCode 406, and nothing is sent.
	InactiveRecipients []string
	// LookupLag hides messages younger than it from GET /messages/outbound, modelling a search
	// that trails the send. Postmark documents no such lag, nor its absence.
	LookupLag time.Duration
	// Now is the clock for SubmittedAt, ReceivedAt and the lookup lag; nil means time.Now.
	Now func() time.Time
	// Logger receives one line per injected fault; nil discards.
	Logger *slog.Logger
}

// Server is the fake Postmark API. It implements http.Handler and is safe for concurrent use.
type Server struct {
	token    string
	inactive map[string]bool // lower-case addresses
	log      *slog.Logger
	now      func() time.Time
	mux      *http.ServeMux
	// requests records every request, before anything else happens to it.
	requests traffic.Log

	mu       sync.Mutex
	lag      time.Duration
	messages []*Message          // oldest first
	faults   fault.Queues[Fault] // by reference: a Metadata value
}

var _ http.Handler = (*Server)(nil)

// New returns a Server ready to serve.
func New(cfg Config) *Server {
	s := &Server{
		token:    cfg.ServerToken,
		inactive: make(map[string]bool),
		log:      cfg.Logger,
		now:      cfg.Now,
		lag:      cfg.LookupLag,
	}
	if s.token == "" {
		s.token = DefaultServerToken
	}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	if s.now == nil {
		s.now = time.Now
	}
	for _, a := range cfg.InactiveRecipients {
		s.inactive[strings.ToLower(strings.TrimSpace(a))] = true
	}
	s.mux = http.NewServeMux()
	s.mux.HandleFunc("POST /email", s.handleSend)
	s.mux.HandleFunc("GET /messages/outbound", s.handleSearch)
	s.mux.HandleFunc("/", func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, http.StatusNotFound, errorBody{ErrorCode: 0, Message: "Entity doesn't exist"})
	})
	return s
}

// ServeHTTP records the request, then serves the API.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.requests.Record(r, nil, s.now())
	s.mux.ServeHTTP(w, r)
}

// Requests returns every request received so far, oldest first, with its headers as sent
// (credentials included: it is how a test proves a credential went only where it should). The
// fake records a request before it reads the body, so Body is nil.
func (s *Server) Requests() []traffic.Request { return s.requests.All() }

// Effects reports how many messages were really accepted for sending whose Metadata holds
// reference as a value (under any key), whatever any client was told and regardless of the
// search lag: the number a test asserts "at most once" against. An empty reference counts
// nothing.
func (s *Server) Effects(reference string) int {
	if reference == "" {
		return 0
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, m := range s.messages {
		if m.carries(reference) {
			n++
		}
	}
	return n
}

// Messages returns a copy of every accepted message, oldest first.
func (s *Server) Messages() []Message {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]Message, len(s.messages))
	for i, m := range s.messages {
		out[i] = m.clone()
	}
	return out
}

// SetLookupLag changes how long a new message stays out of search results.
func (s *Server) SetLookupLag(d time.Duration) {
	s.mu.Lock()
	s.lag = d
	s.mu.Unlock()
}

// authenticate checks X-Postmark-Server-Token and answers 401 with ErrorCode 10 when it is
// missing or wrong. An account token is not a server token; sending both is refused as Postmark
// refuses it.
func (s *Server) authenticate(w http.ResponseWriter, r *http.Request) bool {
	server := r.Header.Get("X-Postmark-Server-Token")
	account := r.Header.Get("X-Postmark-Account-Token")
	switch {
	case server != "" && account != "":
		writeJSON(w, http.StatusUnauthorized, errorBody{ErrorCode: ErrBadToken, Message: "Please do not include Account API Token for Server API Token calls."})
		return false
	case !strings.EqualFold(strings.TrimSpace(server), s.token):
		writeJSON(w, http.StatusUnauthorized, errorBody{ErrorCode: ErrBadToken, Message: "Request does not contain a valid Server token."})
		return false
	}
	return true
}

// errorBody is every Postmark error answer: {"ErrorCode", "Message"}.
type errorBody struct {
	ErrorCode int    `json:"ErrorCode"`
	Message   string `json:"Message"`
}

func writeError(w http.ResponseWriter, status, code int, message string) {
	writeJSON(w, status, errorBody{ErrorCode: code, Message: message})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		panic("postmark: encoding " + fmt.Sprintf("%T", v) + ": " + err.Error())
	}
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.WriteHeader(status)
	_, _ = w.Write(b)
}
