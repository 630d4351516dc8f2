package github

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/actledger/actledger/internal/mocksupplier/fault"
)

// maxBody bounds request bodies.
const maxBody = 1 << 20

// Issue is one issue as the fake stores it. Issues never change once created.
type Issue struct {
	ID     int64
	NodeID string
	// Number counts from 1 in each repository.
	Number int
	// Repository is "owner/name" as configured.
	Repository string
	Title      string
	// Body is "" when the create request sent none (GitHub answers null then).
	Body      string
	Labels    []string
	Author    string
	CreatedAt time.Time
	// HTMLURL is the issue's page, https://github.com/owner/name/issues/N.
	HTMLURL string
}

// Views: the JSON GitHub sends for an issue, a user, a label and a repository, in the fields
// and order of the REST reference (https://docs.github.com/rest/issues/issues#get-an-issue).

type userView struct {
	Login   string `json:"login"`
	ID      int64  `json:"id"`
	NodeID  string `json:"node_id"`
	URL     string `json:"url"`
	HTMLURL string `json:"html_url"`
	Type    string `json:"type"`
	// SiteAdmin is always false.
	SiteAdmin bool `json:"site_admin"`
}

type labelView struct {
	ID          int64   `json:"id"`
	NodeID      string  `json:"node_id"`
	URL         string  `json:"url"`
	Name        string  `json:"name"`
	Description *string `json:"description"`
	Color       string  `json:"color"`
	Default     bool    `json:"default"`
}

type issueView struct {
	ID                int64       `json:"id"`
	NodeID            string      `json:"node_id"`
	URL               string      `json:"url"`
	RepositoryURL     string      `json:"repository_url"`
	LabelsURL         string      `json:"labels_url"`
	CommentsURL       string      `json:"comments_url"`
	EventsURL         string      `json:"events_url"`
	HTMLURL           string      `json:"html_url"`
	Number            int         `json:"number"`
	State             string      `json:"state"`
	StateReason       *string     `json:"state_reason"`
	Title             string      `json:"title"`
	Body              *string     `json:"body"`
	User              userView    `json:"user"`
	Labels            []labelView `json:"labels"`
	Assignee          *userView   `json:"assignee"`
	Assignees         []userView  `json:"assignees"`
	Milestone         any         `json:"milestone"`
	Locked            bool        `json:"locked"`
	ActiveLockReason  *string     `json:"active_lock_reason"`
	Comments          int         `json:"comments"`
	ClosedAt          *string     `json:"closed_at"`
	CreatedAt         string      `json:"created_at"`
	UpdatedAt         string      `json:"updated_at"`
	AuthorAssociation string      `json:"author_association"`
	// Score is set on search results only.
	Score *float64 `json:"score,omitempty"`
}

type repositoryView struct {
	ID       int64    `json:"id"`
	NodeID   string   `json:"node_id"`
	Name     string   `json:"name"`
	FullName string   `json:"full_name"`
	Private  bool     `json:"private"`
	Owner    userView `json:"owner"`
	HTMLURL  string   `json:"html_url"`
	URL      string   `json:"url"`
}

const (
	apiURL  = "https://api.github.com"
	siteURL = "https://github.com"
)

// timeFormat is GitHub's timestamp format: ISO 8601 in UTC, whole seconds.
const timeFormat = "2006-01-02T15:04:05Z"

func (s *Server) userView(login string) userView {
	return userView{
		Login: login, ID: 1, NodeID: "U_" + strings.ToLower(login),
		URL: apiURL + "/users/" + login, HTMLURL: siteURL + "/" + login, Type: "User",
	}
}

func (s *Server) repositoryView(r *repository) repositoryView {
	owner := s.userView(r.owner)
	owner.ID, owner.Type = r.id+1, "Organization"
	return repositoryView{
		ID: r.id, NodeID: "R_" + strconv.FormatInt(r.id, 36), Name: r.name, FullName: r.fullName(),
		Private: true, Owner: owner,
		HTMLURL: siteURL + "/" + r.fullName(), URL: apiURL + "/repos/" + r.fullName(),
	}
}

// viewLocked renders is as GitHub does. s.mu must be held (labels are looked up in the
// repository).
func (s *Server) viewLocked(is *Issue) issueView {
	r := s.repos[strings.ToLower(is.Repository)]
	repoURL := apiURL + "/repos/" + is.Repository
	self := repoURL + "/issues/" + strconv.Itoa(is.Number)
	v := issueView{
		ID: is.ID, NodeID: is.NodeID, URL: self, RepositoryURL: repoURL,
		LabelsURL: self + "/labels{/name}", CommentsURL: self + "/comments", EventsURL: self + "/events",
		HTMLURL: is.HTMLURL, Number: is.Number, State: "open", Title: is.Title,
		User: s.userView(is.Author), Labels: []labelView{}, Assignees: []userView{},
		CreatedAt: is.CreatedAt.UTC().Format(timeFormat), UpdatedAt: is.CreatedAt.UTC().Format(timeFormat),
		AuthorAssociation: "MEMBER",
	}
	if is.Body != "" {
		b := is.Body
		v.Body = &b
	}
	for _, name := range is.Labels {
		id := r.labels[name]
		v.Labels = append(v.Labels, labelView{
			ID: id, NodeID: "LA_" + strconv.FormatInt(id, 36), URL: repoURL + "/labels/" + name,
			Name: name, Color: "ededed",
		})
	}
	return v
}

// createRequest is the body of POST /repos/{owner}/{repo}/issues, decoded loosely so that each
// field can be checked the way GitHub reports it.
type createRequest struct {
	Title  json.RawMessage `json:"title"`
	Body   json.RawMessage `json:"body"`
	Labels json.RawMessage `json:"labels"`
}

// parseCreate decodes and validates a create body as GitHub does: 400 for a body that is not
// one JSON object, 422 Validation Failed for a missing or mistyped field. ok is false when it
// has written such an answer.
func parseCreate(w http.ResponseWriter, raw []byte) (title, body string, labels []string, ok bool) {
	var req createRequest
	dec := json.NewDecoder(bytes.NewReader(raw))
	if err := dec.Decode(&req); err != nil {
		var typeErr *json.UnmarshalTypeError
		if errors.As(err, &typeErr) && typeErr.Field == "" {
			writeMessage(w, http.StatusBadRequest, "Body should be a JSON object", docsCreateIssue)
		} else {
			writeMessage(w, http.StatusBadRequest, "Problems parsing JSON", docsCreateIssue)
		}
		return "", "", nil, false
	}
	if _, err := dec.Token(); err != io.EOF {
		writeMessage(w, http.StatusBadRequest, "Problems parsing JSON", docsCreateIssue)
		return "", "", nil, false
	}
	invalid := func(field string) {
		writeValidationFailed(w, docsCreateIssue, fieldError{Resource: "Issue", Field: field, Code: "invalid"})
	}
	// title: required, a string or a number (the schema allows both).
	trimmed := bytes.TrimSpace(req.Title)
	switch {
	case len(trimmed) == 0 || string(trimmed) == "null":
		writeValidationFailed(w, docsCreateIssue, fieldError{Resource: "Issue", Field: "title", Code: "missing_field"})
		return "", "", nil, false
	case trimmed[0] == '"':
		if err := json.Unmarshal(trimmed, &title); err != nil {
			invalid("title")
			return "", "", nil, false
		}
	default:
		var n json.Number
		if err := json.Unmarshal(trimmed, &n); err != nil {
			invalid("title")
			return "", "", nil, false
		}
		title = n.String()
	}
	if strings.TrimSpace(title) == "" {
		writeValidationFailed(w, docsCreateIssue, fieldError{Resource: "Issue", Field: "title", Code: "missing_field"})
		return "", "", nil, false
	}
	// body: optional string or null.
	if b := bytes.TrimSpace(req.Body); len(b) > 0 && string(b) != "null" {
		if err := json.Unmarshal(b, &body); err != nil {
			invalid("body")
			return "", "", nil, false
		}
	}
	// labels: optional array of names or of objects with a name.
	if l := bytes.TrimSpace(req.Labels); len(l) > 0 && string(l) != "null" {
		var items []json.RawMessage
		if err := json.Unmarshal(l, &items); err != nil {
			invalid("labels")
			return "", "", nil, false
		}
		for _, it := range items {
			var name string
			if err := json.Unmarshal(it, &name); err != nil {
				var obj struct {
					Name string `json:"name"`
				}
				if err := json.Unmarshal(it, &obj); err != nil || obj.Name == "" {
					invalid("labels")
					return "", "", nil, false
				}
				name = obj.Name
			}
			if name == "" {
				invalid("labels")
				return "", "", nil, false
			}
			labels = append(labels, name)
		}
	}
	return title, body, labels, true
}

// lookupRepo finds the repository of the request's path, answering 404 when there is none.
// s.mu must not be held.
func (s *Server) lookupRepo(w http.ResponseWriter, r *http.Request, docs string) (*repository, bool) {
	key := strings.ToLower(r.PathValue("owner") + "/" + r.PathValue("repo"))
	s.mu.Lock()
	repo, ok := s.repos[key]
	s.mu.Unlock()
	if !ok {
		writeMessage(w, http.StatusNotFound, "Not Found", docs)
	}
	return repo, ok
}

// handleCreate serves POST /repos/{owner}/{repo}/issues: credential, API version, repository,
// body, then the next fault, then the commit.
func (s *Server) handleCreate(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	switch s.authenticate(r) {
	case authBad:
		writeBadCredentials(w)
		return
	case authMissing:
		// Without a token GitHub does not confirm that a private repository exists.
		writeMessage(w, http.StatusNotFound, "Not Found", docsCreateIssue)
		return
	}
	if !checkVersion(w, r) {
		return
	}
	repo, ok := s.lookupRepo(w, r, docsCreateIssue)
	if !ok {
		return
	}
	if repo.issuesDisabled {
		writeMessage(w, http.StatusGone, "Issues are disabled for this repo", docsCreateIssue)
		return
	}
	raw, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxBody))
	if err != nil {
		writeMessage(w, http.StatusRequestEntityTooLarge, "Payload too large", docsCreateIssue)
		return
	}
	title, body, labels, ok := parseCreate(w, raw)
	if !ok {
		return
	}

	s.mu.Lock()
	taken, faulty := s.popFaultLocked(body)
	s.mu.Unlock()
	if faulty {
		s.log.InfoContext(ctx, "fault injected", "fault", string(taken.Kind), "repository", repo.fullName())
		if taken.beforeCommit() {
			s.refuse(w, taken)
			return
		}
	}

	is := s.commit(repo, title, body, labels)
	s.log.DebugContext(ctx, "issue created", "repository", repo.fullName(), "number", is.Number)
	if faulty {
		switch taken.Kind {
		case DropAfterCommit:
			fault.DropConnection(w)
			return
		case Error500AfterCommit:
			writeMessage(w, http.StatusInternalServerError, "Server Error", docsREST)
			return
		case DelayAfterCommit:
			if !fault.Hold(ctx, time.Duration(taken.MS)*time.Millisecond) {
				return
			}
		}
	}
	s.mu.Lock()
	v := s.viewLocked(is)
	s.mu.Unlock()
	s.rateLimitHeaders(w, "core", 4999, s.now().Add(time.Hour))
	w.Header().Set("Location", v.URL)
	writeJSON(w, http.StatusCreated, v)
}

// commit creates the issue, which from then on exists whatever the client is told, and
// schedules its webhook.
func (s *Server) commit(repo *repository, title, body string, labels []string) *Issue {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.nextID++
	number := len(repo.issues) + 1
	for _, name := range labels {
		if _, ok := repo.labels[name]; !ok {
			s.nextID++
			repo.labels[name] = s.nextID
		}
	}
	is := &Issue{
		ID: s.nextID, NodeID: "I_" + randomText(16), Number: number, Repository: repo.fullName(),
		Title: title, Body: body, Labels: labels, Author: s.login, CreatedAt: s.now().UTC(),
		HTMLURL: siteURL + "/" + repo.fullName() + "/issues/" + strconv.Itoa(number),
	}
	repo.issues = append(repo.issues, is)
	s.issues = append(s.issues, is)
	s.scheduleWebhookLocked(repo, is)
	return is
}

// refuse answers a fault that lets nothing be created.
func (s *Server) refuse(w http.ResponseWriter, f Fault) {
	now := s.now()
	switch f.Kind {
	case PrimaryRateLimit403:
		s.rateLimitHeaders(w, "core", 0, now.Add(time.Duration(f.retryAfter())*time.Second))
		writeMessage(w, http.StatusForbidden, "API rate limit exceeded for user ID 1.", docsRateLimits)
	case SecondaryRateLimit403, SecondaryRateLimit429:
		s.rateLimitHeaders(w, "core", 4999, now.Add(time.Hour))
		w.Header().Set("Retry-After", strconv.Itoa(f.retryAfter()))
		status := http.StatusForbidden
		if f.Kind == SecondaryRateLimit429 {
			status = http.StatusTooManyRequests
		}
		writeMessage(w, status, secondaryRateLimitMessage, docsRateLimits+"#about-secondary-rate-limits")
	case Reject422:
		writeValidationFailed(w, docsCreateIssue, fieldError{Resource: "Issue", Code: "custom", Message: "was submitted too quickly"})
	case Unauthorized401:
		writeBadCredentials(w)
	}
}

// secondaryRateLimitMessage is the message GitHub sends with a secondary rate limit.
const secondaryRateLimitMessage = "You have exceeded a secondary rate limit. Please wait a few minutes before you try again."

// handleGet serves GET /repos/{owner}/{repo}/issues/{number}. Reads by number are consistent: an
// issue is there as soon as it is created.
func (s *Server) handleGet(w http.ResponseWriter, r *http.Request) {
	const docs = "https://docs.github.com/rest/issues/issues#get-an-issue"
	if !s.readAccess(w, r, docs) {
		return
	}
	repo, ok := s.lookupRepo(w, r, docs)
	if !ok {
		return
	}
	n, err := strconv.Atoi(r.PathValue("number"))
	s.mu.Lock()
	if err != nil || n < 1 || n > len(repo.issues) {
		s.mu.Unlock()
		writeMessage(w, http.StatusNotFound, "Not Found", docs)
		return
	}
	v := s.viewLocked(repo.issues[n-1])
	s.mu.Unlock()
	s.rateLimitHeaders(w, "core", 4999, s.now().Add(time.Hour))
	writeJSON(w, http.StatusOK, v)
}

// handleList serves GET /repos/{owner}/{repo}/issues: state (open, closed, all; default open),
// sort=created with direction (default desc), per_page (default 30, at most 100) and page. It
// does not lag, unlike search. Every fake issue is open.
func (s *Server) handleList(w http.ResponseWriter, r *http.Request) {
	const docs = "https://docs.github.com/rest/issues/issues#list-repository-issues"
	if !s.readAccess(w, r, docs) {
		return
	}
	repo, ok := s.lookupRepo(w, r, docs)
	if !ok {
		return
	}
	if repo.issuesDisabled {
		writeMessage(w, http.StatusGone, "Issues are disabled for this repo", docs)
		return
	}
	q := r.URL.Query()
	state := q.Get("state")
	if state == "" {
		state = "open"
	}
	if state != "open" && state != "closed" && state != "all" {
		writeValidationFailed(w, docs, fieldError{Resource: "Issue", Field: "state", Code: "invalid"})
		return
	}
	perPage, page, ok := paging(w, q, docs)
	if !ok {
		return
	}
	var since time.Time
	if v := q.Get("since"); v != "" {
		t, err := time.Parse(time.RFC3339, v)
		if err != nil {
			writeValidationFailed(w, docs, fieldError{Resource: "Issue", Field: "since", Code: "invalid"})
			return
		}
		since = t
	}
	if sortBy := q.Get("sort"); sortBy != "" && sortBy != "created" && sortBy != "updated" && sortBy != "comments" {
		writeValidationFailed(w, docs, fieldError{Resource: "Issue", Field: "sort", Code: "invalid"})
		return
	}
	s.mu.Lock()
	if s.listOutages != 0 {
		if s.listOutages > 0 {
			s.listOutages--
		}
		s.mu.Unlock()
		writeMessage(w, http.StatusServiceUnavailable, "Service unavailable", docs)
		return
	}
	var picked []*Issue
	if state != "closed" {
		for _, is := range repo.issues {
			// The fake's issues never change: an issue was last updated when it was created.
			if since.IsZero() || !is.CreatedAt.Before(since) {
				picked = append(picked, is)
			}
		}
	}
	// Numbers follow creation, so created (the default sort) and updated order alike here.
	if q.Get("direction") == "asc" {
		sort.SliceStable(picked, func(i, j int) bool { return picked[i].Number < picked[j].Number })
	} else {
		sort.SliceStable(picked, func(i, j int) bool { return picked[i].Number > picked[j].Number })
	}
	views := []issueView{}
	for _, is := range pageOf(picked, perPage, page) {
		views = append(views, s.viewLocked(is))
	}
	s.mu.Unlock()
	if page*perPage < len(picked) {
		next := *r.URL
		nq := next.Query()
		nq.Set("page", strconv.Itoa(page+1))
		next.RawQuery = nq.Encode()
		w.Header().Set("Link", `<https://`+r.Host+next.RequestURI()+`>; rel="next"`)
	}
	s.rateLimitHeaders(w, "core", 4999, s.now().Add(time.Hour))
	writeJSON(w, http.StatusOK, views)
}

// readAccess checks the credential of a read: a bad token answers 401, a missing one 404 (the
// fake's repositories are private).
func (s *Server) readAccess(w http.ResponseWriter, r *http.Request, docs string) bool {
	switch s.authenticate(r) {
	case authBad:
		writeBadCredentials(w)
		return false
	case authMissing:
		writeMessage(w, http.StatusNotFound, "Not Found", docs)
		return false
	}
	return checkVersion(w, r)
}

// paging reads per_page (default 30, at most 100) and page (default 1).
func paging(w http.ResponseWriter, q map[string][]string, docs string) (perPage, page int, ok bool) {
	perPage, page = 30, 1
	read := func(name string, dst *int) bool {
		vs := q[name]
		if len(vs) == 0 || vs[0] == "" {
			return true
		}
		n, err := strconv.Atoi(vs[0])
		if err != nil || n < 1 {
			writeValidationFailed(w, docs, fieldError{Field: name, Code: "invalid"})
			return false
		}
		*dst = n
		return true
	}
	if !read("per_page", &perPage) || !read("page", &page) {
		return 0, 0, false
	}
	return min(perPage, 100), page, true
}

func pageOf(items []*Issue, perPage, page int) []*Issue {
	start := (page - 1) * perPage
	if start >= len(items) {
		return nil
	}
	return items[start:min(start+perPage, len(items))]
}
