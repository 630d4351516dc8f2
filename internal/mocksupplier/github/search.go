package github

import (
	"net/http"
	"strings"
	"time"
	"unicode"
)

// searchQuery is a parsed q of GET /search/issues.
type searchQuery struct {
	repos []string // lower-case owner/name; empty: every repository
	// kind is "issue", "pr" or "" (both); the fake has issues only.
	kind string
	// state is "open", "closed" or "" (both); every fake issue is open.
	state string
	// in lists the fields searched: "title", "body", "comments"; empty means all of them.
	in []string
	// terms are the words and quoted phrases; each must occur in one of the fields.
	terms []string
}

// parseQuery splits q into words, quoted phrases and qualifiers. It supports the qualifiers a
// lookup needs (repo:, is:issue|pr|open|closed, type:issue|pr, state:, in:title,body,comments);
// any other qualifier is reported in unsupported, so a test never mistakes an ignored filter for
// a match.
func parseQuery(q string) (sq searchQuery, unsupported string) {
	for _, tok := range splitQuery(q) {
		if tok.quoted {
			sq.terms = append(sq.terms, tok.text)
			continue
		}
		key, value, isQualifier := strings.Cut(tok.text, ":")
		if !isQualifier {
			sq.terms = append(sq.terms, tok.text)
			continue
		}
		value = strings.Trim(value, `"`)
		switch strings.ToLower(key) {
		case "repo":
			sq.repos = append(sq.repos, strings.ToLower(value))
		case "is", "type":
			switch v := strings.ToLower(value); v {
			case "issue", "pr":
				sq.kind = v
			case "pull-request":
				sq.kind = "pr"
			case "open", "closed":
				if key == "is" {
					sq.state = v
					continue
				}
				return sq, tok.text
			default:
				return sq, tok.text
			}
		case "state":
			sq.state = strings.ToLower(value)
		case "in":
			for f := range strings.SplitSeq(strings.ToLower(value), ",") {
				if f == "comment" {
					f = "comments"
				}
				if f != "title" && f != "body" && f != "comments" {
					return sq, tok.text
				}
				sq.in = append(sq.in, f)
			}
		default:
			return sq, tok.text
		}
	}
	return sq, ""
}

type queryToken struct {
	text   string
	quoted bool
}

// splitQuery splits q at white space, keeping "quoted phrases" (and qualifier:"quoted values")
// together.
func splitQuery(q string) []queryToken {
	var toks []queryToken
	var cur strings.Builder
	quoted, inQuote := false, false
	flush := func() {
		if cur.Len() > 0 {
			toks = append(toks, queryToken{text: cur.String(), quoted: quoted})
		}
		cur.Reset()
		quoted = false
	}
	for _, r := range q {
		switch {
		case r == '"':
			if !inQuote && cur.Len() == 0 {
				quoted = true
			} else if !quoted {
				cur.WriteRune(r) // part of qualifier:"value"
			}
			inQuote = !inQuote
			if !inQuote && quoted {
				flush()
			}
		case unicode.IsSpace(r) && !inQuote:
			flush()
		default:
			cur.WriteRune(r)
		}
	}
	flush()
	return toks
}

// matches reports whether is satisfies the query. Each term must occur in one of the searched
// fields as a case-insensitive substring; GitHub matches words of a tokenised index instead, so
// the fake finds a reference wherever it appears, and GitHub only where it stands as words.
func (sq searchQuery) matches(is *Issue) bool {
	if len(sq.repos) > 0 {
		found := false
		for _, r := range sq.repos {
			if strings.EqualFold(r, is.Repository) {
				found = true
			}
		}
		if !found {
			return false
		}
	}
	if sq.kind == "pr" || sq.state == "closed" {
		return false
	}
	fields := sq.in
	if len(fields) == 0 {
		fields = []string{"title", "body", "comments"}
	}
	for _, term := range sq.terms {
		term = strings.ToLower(term)
		hit := false
		for _, f := range fields {
			switch f {
			case "title":
				hit = hit || strings.Contains(strings.ToLower(is.Title), term)
			case "body":
				hit = hit || strings.Contains(strings.ToLower(is.Body), term)
			}
		}
		if !hit {
			return false
		}
	}
	return true
}

// SetSearchTimeouts makes the next n searches stop at GitHub's time limit before they reached
// any match: they answer 200 with no items and incomplete_results true, as GitHub answers a
// query that "exceeds the time limit" with "the matches that were already found prior to the
// timeout" (https://docs.github.com/rest/search/search, "Timeouts and incomplete results"). A
// negative n makes every search time out; 0 ends it.
func (s *Server) SetSearchTimeouts(n int) {
	s.mu.Lock()
	s.searchTimeouts = n
	s.mu.Unlock()
}

// SetListOutages makes the next n lists of a repository's issues answer 503 Service
// unavailable (an answer the REST reference lists for GitHub's endpoints), so that nothing
// reads the repository's issues while a test needs it not to; negative: every one, 0 ends it.
func (s *Server) SetListOutages(n int) {
	s.mu.Lock()
	s.listOutages = n
	s.mu.Unlock()
}

// searchResult is the answer of GET /search/issues.
type searchResult struct {
	TotalCount        int         `json:"total_count"`
	IncompleteResults bool        `json:"incomplete_results"`
	Items             []issueView `json:"items"`
}

// handleSearch serves GET /search/issues?q=…[&per_page&page]: the issues that match q and are
// older than the lookup lag, newest first, at most 1,000 in all as GitHub caps a search.
func (s *Server) handleSearch(w http.ResponseWriter, r *http.Request) {
	a := s.authenticate(r)
	if a == authBad {
		writeBadCredentials(w)
		return
	}
	if !checkVersion(w, r) {
		return
	}
	q := r.URL.Query()
	raw := q.Get("q")
	if strings.TrimSpace(raw) == "" {
		writeValidationFailed(w, docsSearch, fieldError{Resource: "Search", Field: "q", Code: "missing"})
		return
	}
	sq, unsupported := parseQuery(raw)
	if unsupported != "" {
		writeValidationFailed(w, docsSearch, fieldError{
			Resource: "Search", Field: "q", Code: "invalid",
			Message: "the fake GitHub does not implement the search qualifier " + unsupported,
		})
		return
	}
	s.mu.Lock()
	for _, name := range sq.repos {
		if _, ok := s.repos[name]; !ok || a == authMissing {
			// GitHub answers 422 for a repo: qualifier naming a repository that does not exist
			// or that the caller cannot see; every fake repository is private.
			s.mu.Unlock()
			writeValidationFailed(w, docsSearch, fieldError{
				Resource: "Search", Field: "q", Code: "invalid",
				Message: "The listed users and repositories cannot be searched either because the resources do not exist or you do not have permission to view them.",
			})
			return
		}
	}
	s.mu.Unlock()
	perPage, page, ok := paging(w, q, docsSearch)
	if !ok {
		return
	}

	s.mu.Lock()
	cutoff := s.now().Add(-s.lag)
	var hits []*Issue
	timedOut := s.searchTimeouts != 0
	if s.searchTimeouts > 0 {
		s.searchTimeouts--
	}
	if a == authOK && !timedOut {
		for i := len(s.issues) - 1; i >= 0; i-- {
			is := s.issues[i]
			if !is.CreatedAt.After(cutoff) && sq.matches(is) {
				hits = append(hits, is)
			}
		}
	}
	total := len(hits)
	if len(hits) > 1000 {
		hits = hits[:1000]
	}
	res := searchResult{TotalCount: total, IncompleteResults: timedOut, Items: []issueView{}}
	score := 1.0
	for _, is := range pageOf(hits, perPage, page) {
		v := s.viewLocked(is)
		v.Score = &score
		res.Items = append(res.Items, v)
	}
	s.mu.Unlock()
	s.rateLimitHeaders(w, "search", 29, s.now().Add(time.Minute))
	writeJSON(w, http.StatusOK, res)
}
