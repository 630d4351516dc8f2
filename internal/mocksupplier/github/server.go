package github

import (
	"crypto/rand"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/actledger/actledger/internal/mocksupplier/fault"
	"github.com/actledger/actledger/internal/mocksupplier/traffic"
)

// Defaults for a zero Config.
const (
	// DefaultToken is the credential a Server built with an empty Config.Token accepts.
	DefaultToken = "github-fake-token"
	// DefaultRepository is the one repository a Server built with no Config.Repositories has.
	DefaultRepository = "acme/support"
	// DefaultLogin is the account the token belongs to: the author of every issue and the sender
	// of every webhook event.
	DefaultLogin = "actledger-bot"
)

// apiVersions are the X-GitHub-Api-Version values the fake accepts. GitHub answers 400 for a
// version that does not exist; a request without the header gets the default version.
var apiVersions = []string{"2022-11-28", "2026-03-10"}

// Config sets up a Server. The zero value is one repository, DefaultRepository, reached with
// DefaultToken, with a search index that never lags, no webhooks and no logs.
type Config struct {
	// Token is the only credential the API accepts, as "Authorization: Bearer <Token>" or
	// "Authorization: token <Token>". Empty means DefaultToken.
	Token string
	// Login is the account the token belongs to. Empty means DefaultLogin.
	Login string
	// Repositories are the repositories that exist, as "owner/name" (matched without regard to
	// case, as GitHub does). Every other repository answers 404, as GitHub answers for one that
	// does not exist or that the token cannot see. Empty means DefaultRepository alone.
	Repositories []string
	// IssuesDisabled lists repositories (of Repositories) whose issues are turned off: creating
	// an issue there answers 410 Gone.
	IssuesDisabled []string
	// LookupLag hides issues younger than it from GET /search/issues: GitHub's search index
	// trails its writes. Reading an issue by number and listing a repository's issues do not lag.
	LookupLag time.Duration
	// Webhook, when set, sends an "issues" event with action "opened" for every new issue.
	Webhook *WebhookConfig
	// Now is the clock for created_at, the lookup lag and rate-limit headers; nil means time.Now.
	// Tests move it to cross the lag without sleeping.
	Now func() time.Time
	// Logger receives one line per injected fault and per unacknowledged webhook; nil discards.
	Logger *slog.Logger
}

// Server is the fake GitHub REST API. It implements http.Handler and is safe for concurrent use.
type Server struct {
	token string
	login string
	log   *slog.Logger
	now   func() time.Time
	mux   *http.ServeMux
	// requests records every request, before anything else happens to it.
	requests traffic.Log
	// hooks sends webhooks; GitHub gives a receiver 10 seconds to answer.
	hooks *traffic.Sender[Delivery]

	mu      sync.Mutex
	lag     time.Duration
	webhook *WebhookConfig
	repos   map[string]*repository // by lower-case "owner/name"
	issues  []*Issue               // every issue, oldest first
	nextID  int64
	faults  fault.Queues[Fault] // by reference: a string the issue body contains
	// searchTimeouts is how many of the next searches stop at GitHub's time
	// limit (SetSearchTimeouts); negative: every one.
	searchTimeouts int
	// listOutages is how many of the next issue lists answer 503
	// (SetListOutages); negative: every one.
	listOutages int
}

var _ http.Handler = (*Server)(nil)

// repository is one repository and its issues, numbered from 1 in creation order.
type repository struct {
	id             int64
	owner, name    string
	issuesDisabled bool
	issues         []*Issue
	labels         map[string]int64 // label name → id, created on first use
}

func (r *repository) fullName() string { return r.owner + "/" + r.name }

// New returns a Server ready to serve. It panics on a Config it cannot honour (a repository name
// that is not "owner/name", or IssuesDisabled naming a repository that is not in Repositories),
// which is a bug in the calling test.
func New(cfg Config) *Server {
	s := &Server{
		token:  cfg.Token,
		login:  cfg.Login,
		log:    cfg.Logger,
		now:    cfg.Now,
		lag:    cfg.LookupLag,
		repos:  make(map[string]*repository),
		nextID: 1000,
	}
	if s.token == "" {
		s.token = DefaultToken
	}
	if s.login == "" {
		s.login = DefaultLogin
	}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	if s.now == nil {
		s.now = time.Now
	}
	s.hooks = traffic.NewSender[Delivery](traffic.Config{Timeout: 10 * time.Second, Now: s.now, Logger: s.log})
	if cfg.Webhook != nil {
		wh := *cfg.Webhook
		s.webhook = &wh
	}
	names := cfg.Repositories
	if len(names) == 0 {
		names = []string{DefaultRepository}
	}
	for _, full := range names {
		owner, name, ok := strings.Cut(full, "/")
		if !ok || owner == "" || name == "" || strings.Contains(name, "/") {
			panic(fmt.Sprintf("github: New: repository %q is not owner/name", full))
		}
		s.nextID++
		s.repos[strings.ToLower(full)] = &repository{id: s.nextID, owner: owner, name: name, labels: make(map[string]int64)}
	}
	for _, full := range cfg.IssuesDisabled {
		r, ok := s.repos[strings.ToLower(full)]
		if !ok {
			panic(fmt.Sprintf("github: New: IssuesDisabled names %q, which is not in Repositories", full))
		}
		r.issuesDisabled = true
	}
	s.mux = http.NewServeMux()
	s.mux.HandleFunc("POST /repos/{owner}/{repo}/issues", s.handleCreate)
	s.mux.HandleFunc("GET /repos/{owner}/{repo}/issues", s.handleList)
	s.mux.HandleFunc("GET /repos/{owner}/{repo}/issues/{number}", s.handleGet)
	s.mux.HandleFunc("GET /search/issues", s.handleSearch)
	s.mux.HandleFunc("/", func(w http.ResponseWriter, _ *http.Request) {
		writeMessage(w, http.StatusNotFound, "Not Found", docsREST)
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

// Effects reports how many issues really exist whose body contains reference, in any
// repository, whatever any client was told and regardless of the search lag: the number a test
// asserts "at most once" against. An empty reference counts nothing.
func (s *Server) Effects(reference string) int {
	if reference == "" {
		return 0
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, is := range s.issues {
		if strings.Contains(is.Body, reference) {
			n++
		}
	}
	return n
}

// Issues returns a copy of every issue, oldest first.
func (s *Server) Issues() []Issue {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]Issue, len(s.issues))
	for i, is := range s.issues {
		out[i] = *is
		out[i].Labels = append([]string(nil), is.Labels...)
	}
	return out
}

// SetLookupLag changes how long a new issue stays out of search results.
func (s *Server) SetLookupLag(d time.Duration) {
	s.mu.Lock()
	s.lag = d
	s.mu.Unlock()
}

// Close stops pending webhook deliveries and waits for them to end. Issues created afterwards
// send no webhooks; the handler keeps serving. It is idempotent.
func (s *Server) Close() { s.hooks.Close() }

// credential reads the token from the Authorization header: "Bearer <t>" or "token <t>", the
// scheme in any case. present is false when there is no Authorization header at all.
func credential(r *http.Request) (token string, present bool) {
	h := r.Header.Get("Authorization")
	if h == "" {
		return "", false
	}
	scheme, value, ok := strings.Cut(strings.TrimSpace(h), " ")
	if !ok || !(strings.EqualFold(scheme, "bearer") || strings.EqualFold(scheme, "token")) {
		return "", true
	}
	return strings.TrimSpace(value), true
}

// auth is the outcome of checking a request's credential.
type auth int

const (
	authOK auth = iota
	authMissing
	authBad
)

func (s *Server) authenticate(r *http.Request) auth {
	tok, present := credential(r)
	switch {
	case !present:
		return authMissing
	case tok != s.token:
		return authBad
	}
	return authOK
}

// writeBadCredentials is GitHub's answer to a token it does not know.
func writeBadCredentials(w http.ResponseWriter) {
	writeMessage(w, http.StatusUnauthorized, "Bad credentials", docsREST)
}

// checkVersion answers 400 and reports false when X-GitHub-Api-Version names a version that
// does not exist.
func checkVersion(w http.ResponseWriter, r *http.Request) bool {
	v := r.Header.Get("X-GitHub-Api-Version")
	if v == "" {
		return true
	}
	for _, ok := range apiVersions {
		if v == ok {
			return true
		}
	}
	writeMessage(w, http.StatusBadRequest,
		fmt.Sprintf("Unsupported 'X-GitHub-Api-Version' header: %s. Supported versions are: %s", v, strings.Join(apiVersions, ", ")),
		"https://docs.github.com/rest/about-the-rest-api/api-versions")
	return false
}

// rateLimitHeaders sets the rate-limit headers GitHub sends with every answer. The fake keeps no
// count: resource "search" reports 29 of 30 left, "core" 4999 of 5000, unless a fault says 0.
func (s *Server) rateLimitHeaders(w http.ResponseWriter, resource string, remaining int, reset time.Time) {
	limit := 5000
	if resource == "search" {
		limit = 30
	}
	h := w.Header()
	h.Set("X-Ratelimit-Limit", strconv.Itoa(limit))
	h.Set("X-Ratelimit-Remaining", strconv.Itoa(remaining))
	h.Set("X-Ratelimit-Used", strconv.Itoa(limit-remaining))
	h.Set("X-Ratelimit-Reset", strconv.FormatInt(reset.Unix(), 10))
	h.Set("X-Ratelimit-Resource", resource)
}

// Documentation links the fake puts in error bodies, as GitHub does.
const (
	docsREST        = "https://docs.github.com/rest"
	docsCreateIssue = "https://docs.github.com/rest/issues/issues#create-an-issue"
	docsSearch      = "https://docs.github.com/rest/search/search#search-issues-and-pull-requests"
	docsRateLimits  = "https://docs.github.com/rest/using-the-rest-api/rate-limits-for-the-rest-api"
)

// errorBody is GitHub's error answer: {"message", "documentation_url", "errors"?}.
type errorBody struct {
	Message          string       `json:"message"`
	Errors           []fieldError `json:"errors,omitempty"`
	DocumentationURL string       `json:"documentation_url"`
}

// fieldError is one entry of a 422 Validation Failed answer.
type fieldError struct {
	Resource string `json:"resource,omitempty"`
	Field    string `json:"field,omitempty"`
	Code     string `json:"code"`
	Message  string `json:"message,omitempty"`
}

func writeMessage(w http.ResponseWriter, status int, message, docs string) {
	writeJSON(w, status, errorBody{Message: message, DocumentationURL: docs})
}

func writeValidationFailed(w http.ResponseWriter, docs string, errs ...fieldError) {
	writeJSON(w, http.StatusUnprocessableEntity, errorBody{Message: "Validation Failed", Errors: errs, DocumentationURL: docs})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		panic("github: encoding " + fmt.Sprintf("%T", v) + ": " + err.Error())
	}
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.WriteHeader(status)
	_, _ = w.Write(b)
}

// randomText returns n random lower-case base32 characters.
func randomText(n int) string {
	t := strings.ToLower(rand.Text())
	for len(t) < n {
		t += strings.ToLower(rand.Text())
	}
	return t[:n]
}
