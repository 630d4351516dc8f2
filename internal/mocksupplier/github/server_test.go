package github_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/actledger/actledger/internal/mocksupplier/github"
	"github.com/actledger/actledger/internal/mocksupplier/internal/faketest"
)

// fixture is a fake GitHub served over a real socket, and a client that never reuses
// connections.
type fixture struct {
	gh     *github.Server
	url    string
	clock  *faketest.Clock
	client *http.Client
}

func setup(t *testing.T, cfg github.Config) fixture {
	t.Helper()
	c := faketest.NewClock(faketest.Start)
	if cfg.Now == nil {
		cfg.Now = c.Now
	}
	gh := github.New(cfg)
	t.Cleanup(gh.Close)
	return fixture{gh: gh, url: faketest.Serve(t, gh), clock: c, client: faketest.Client()}
}

// reply is what a client saw, read as GitHub answers.
type reply struct{ faketest.Reply }

func (r reply) message(t *testing.T) string {
	t.Helper()
	var e struct {
		Message string `json:"message"`
	}
	r.Decode(t, &e)
	return e.Message
}

// do sends one request with the given Authorization header value ("" for none).
func (f fixture) do(method, path, authorization, body string) (reply, error) {
	r, err := faketest.Do(f.client, method, f.url+path, body, "Accept", "application/vnd.github+json",
		"X-GitHub-Api-Version", "2022-11-28", "Authorization", authorization, "Content-Type", faketest.JSON(body))
	return reply{r}, err
}

func (f fixture) must(t *testing.T, method, path, body string) reply {
	t.Helper()
	r, err := f.do(method, path, "Bearer "+github.DefaultToken, body)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	return r
}

// issueBody is a create body carrying reference the way actledger's recipe does.
func issueBody(reference string) string {
	b, _ := json.Marshal(map[string]any{
		"title":  "Printer on floor 3 is jammed",
		"body":   "Reported by the front desk.\n\nactledger reference: " + reference,
		"labels": []string{"support"},
	})
	return string(b)
}

type issue struct {
	ID      int64  `json:"id"`
	Number  int    `json:"number"`
	HTMLURL string `json:"html_url"`
	Title   string `json:"title"`
	Body    string `json:"body"`
	State   string `json:"state"`
	Labels  []struct {
		Name string `json:"name"`
	} `json:"labels"`
}

func (f fixture) create(t *testing.T, body string) issue {
	t.Helper()
	r := f.must(t, http.MethodPost, "/repos/acme/support/issues", body)
	if r.Status != http.StatusCreated {
		t.Fatalf("create: status %d, body %s", r.Status, r.Body)
	}
	var is issue
	r.Decode(t, &is)
	return is
}

type searchResult struct {
	TotalCount        int     `json:"total_count"`
	IncompleteResults bool    `json:"incomplete_results"`
	Items             []issue `json:"items"`
}

// search runs the recipe's lookup query for reference.
func (f fixture) search(t *testing.T, reference string) searchResult {
	t.Helper()
	q := url.QueryEscape(`repo:acme/support is:issue in:body "` + reference + `"`)
	r := f.must(t, http.MethodGet, "/search/issues?q="+q, "")
	if r.Status != http.StatusOK {
		t.Fatalf("search %s: status %d, body %s", reference, r.Status, r.Body)
	}
	var res searchResult
	r.Decode(t, &res)
	return res
}

func TestCreateAnswersTheIssueAsGitHubDoes(t *testing.T) {
	t.Parallel()
	f := setup(t, github.Config{})

	r := f.must(t, http.MethodPost, "/repos/acme/support/issues", issueBody("al_1"))
	if r.Status != http.StatusCreated {
		t.Fatalf("status %d, body %s", r.Status, r.Body)
	}
	var is issue
	r.Decode(t, &is)
	checks := []struct {
		name      string
		got, want any
	}{
		{"number", is.Number, 1},
		{"html_url", is.HTMLURL, "https://github.com/acme/support/issues/1"},
		{"state", is.State, "open"},
		{"title", is.Title, "Printer on floor 3 is jammed"},
		{"labels", len(is.Labels), 1},
		{"Location", r.Header.Get("Location"), "https://api.github.com/repos/acme/support/issues/1"},
		{"x-ratelimit-remaining", r.Header.Get("X-Ratelimit-Remaining"), "4999"},
		{"effects", f.gh.Effects("al_1"), 1},
	}
	for _, c := range checks {
		if c.got != c.want {
			t.Errorf("%s = %v, want %v", c.name, c.got, c.want)
		}
	}
	if !strings.HasSuffix(is.Body, "actledger reference: al_1") {
		t.Errorf("body = %q, want it to end with the reference", is.Body)
	}
}

func TestCreateRequiresTheToken(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name          string
		authorization string
		wantStatus    int
		wantMessage   string
	}{
		{"bearer", "Bearer " + github.DefaultToken, http.StatusCreated, ""},
		{"token scheme", "token " + github.DefaultToken, http.StatusCreated, ""},
		{"scheme in any case", "BEARER " + github.DefaultToken, http.StatusCreated, ""},
		{"wrong token", "Bearer ghp_wrong", http.StatusUnauthorized, "Bad credentials"},
		{"basic", "Basic dXNlcjpwYXNz", http.StatusUnauthorized, "Bad credentials"},
		{"no credential hides the private repository", "", http.StatusNotFound, "Not Found"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			f := setup(t, github.Config{})
			r, err := f.do(http.MethodPost, "/repos/acme/support/issues", tc.authorization, issueBody("al_1"))
			if err != nil {
				t.Fatal(err)
			}
			if r.Status != tc.wantStatus {
				t.Fatalf("status = %d, want %d (body %s)", r.Status, tc.wantStatus, r.Body)
			}
			wantEffects := 0
			if tc.wantStatus == http.StatusCreated {
				wantEffects = 1
			} else if got := r.message(t); got != tc.wantMessage {
				t.Errorf("message = %q, want %q", got, tc.wantMessage)
			}
			if got := f.gh.Effects("al_1"); got != wantEffects {
				t.Errorf("Effects = %d, want %d", got, wantEffects)
			}
		})
	}
}

func TestCreateRefusesWhatGitHubRefuses(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name       string
		path       string
		body       string
		version    string
		wantStatus int
		wantMsg    string
	}{
		{"unknown repository", "/repos/acme/nope/issues", issueBody("al_1"), "", http.StatusNotFound, "Not Found"},
		{"issues disabled", "/repos/acme/archive/issues", issueBody("al_1"), "", http.StatusGone, "Issues are disabled for this repo"},
		{"no title", "/repos/acme/support/issues", `{"body":"actledger reference: al_1"}`, "", http.StatusUnprocessableEntity, "Validation Failed"},
		{"empty title", "/repos/acme/support/issues", `{"title":" ","body":"al_1"}`, "", http.StatusUnprocessableEntity, "Validation Failed"},
		{"labels not a list", "/repos/acme/support/issues", `{"title":"t","body":"al_1","labels":"bug"}`, "", http.StatusUnprocessableEntity, "Validation Failed"},
		{"malformed JSON", "/repos/acme/support/issues", `{"title":`, "", http.StatusBadRequest, "Problems parsing JSON"},
		{"not an object", "/repos/acme/support/issues", `["al_1"]`, "", http.StatusBadRequest, "Body should be a JSON object"},
		{"unknown API version", "/repos/acme/support/issues", issueBody("al_1"), "2099-01-01", http.StatusBadRequest, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			f := setup(t, github.Config{
				Repositories:   []string{"acme/support", "acme/archive"},
				IssuesDisabled: []string{"acme/archive"},
			})
			got, err := faketest.Do(f.client, http.MethodPost, f.url+tc.path, tc.body,
				"Authorization", "Bearer "+github.DefaultToken, "X-GitHub-Api-Version", tc.version)
			if err != nil {
				t.Fatal(err)
			}
			r := reply{got}
			if r.Status != tc.wantStatus {
				t.Fatalf("status = %d, want %d (body %s)", r.Status, tc.wantStatus, r.Body)
			}
			if tc.wantMsg != "" {
				if got := r.message(t); got != tc.wantMsg {
					t.Errorf("message = %q, want %q", got, tc.wantMsg)
				}
			}
			if got := f.gh.Effects("al_1"); got != 0 {
				t.Errorf("Effects = %d, want 0: a refused request created an issue", got)
			}
		})
	}
}

func TestSearchLagsBehindCreateButReadsDoNot(t *testing.T) {
	t.Parallel()
	f := setup(t, github.Config{LookupLag: 30 * time.Second})
	is := f.create(t, issueBody("al_lag"))

	if got := f.search(t, "al_lag"); got.TotalCount != 0 || len(got.Items) != 0 {
		t.Errorf("search right after create = %+v, want nothing yet", got)
	}
	if r := f.must(t, http.MethodGet, "/repos/acme/support/issues/1", ""); r.Status != http.StatusOK {
		t.Errorf("GET by number right after create: status %d, want 200 (reads do not lag)", r.Status)
	}
	var listed []issue
	f.must(t, http.MethodGet, "/repos/acme/support/issues?state=all", "").Decode(t, &listed)
	if len(listed) != 1 {
		t.Errorf("list right after create = %d issues, want 1 (listing does not lag)", len(listed))
	}

	f.clock.Advance(29 * time.Second)
	if got := f.search(t, "al_lag"); got.TotalCount != 0 {
		t.Errorf("search 29s after create found %d, want 0", got.TotalCount)
	}
	f.clock.Advance(time.Second)
	got := f.search(t, "al_lag")
	if got.TotalCount != 1 || len(got.Items) != 1 || got.Items[0].Number != is.Number {
		t.Fatalf("search once the lag passed = %+v, want issue #%d", got, is.Number)
	}
	if got.IncompleteResults {
		t.Error("incomplete_results = true, want false")
	}
}

func TestSearchMatchesOnlyTheQuery(t *testing.T) {
	t.Parallel()
	f := setup(t, github.Config{Repositories: []string{"acme/support", "acme/other"}})
	f.create(t, issueBody("al_aaa"))
	f.create(t, issueBody("al_bbb"))
	other := f.must(t, http.MethodPost, "/repos/acme/other/issues", issueBody("al_aaa"))
	if other.Status != http.StatusCreated {
		t.Fatalf("create in acme/other: %d %s", other.Status, other.Body)
	}

	tests := []struct {
		name string
		q    string
		want int
	}{
		{"reference in one repository", `repo:acme/support is:issue in:body "al_aaa"`, 1},
		{"reference in every repository", `is:issue "al_aaa"`, 2},
		{"repository name in any case", `repo:ACME/Support "al_aaa"`, 1},
		{"title words are not body words", `repo:acme/support in:body "Printer on floor"`, 0},
		{"title search", `repo:acme/support in:title printer`, 2},
		{"pull requests only", `repo:acme/support is:pr "al_aaa"`, 0},
		{"unknown reference", `repo:acme/support "al_zzz"`, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := f.must(t, http.MethodGet, "/search/issues?q="+url.QueryEscape(tc.q), "")
			var res searchResult
			r.Decode(t, &res)
			if r.Status != http.StatusOK || res.TotalCount != tc.want || len(res.Items) != tc.want {
				t.Errorf("q=%s: status %d, total_count %d, %d items; want 200 and %d", tc.q, r.Status, res.TotalCount, len(res.Items), tc.want)
			}
		})
	}
}

func TestSearchRefusesWhatItCannotAnswer(t *testing.T) {
	t.Parallel()
	f := setup(t, github.Config{})
	q := "?q=" + url.QueryEscape(`repo:acme/support "al_1"`)
	tests := []struct {
		name          string
		query         string
		authorization string
		want          int
	}{
		{"wrong token", q, "Bearer ghp_wrong", http.StatusUnauthorized},
		{"no token cannot see the private repository", q, "", http.StatusUnprocessableEntity},
		{"unknown repository", "?q=" + url.QueryEscape(`repo:acme/nope "al_1"`), "Bearer " + github.DefaultToken, http.StatusUnprocessableEntity},
		{"no query", "", "Bearer " + github.DefaultToken, http.StatusUnprocessableEntity},
		{"unsupported qualifier", "?q=" + url.QueryEscape(`repo:acme/support label:bug`), "Bearer " + github.DefaultToken, http.StatusUnprocessableEntity},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r, err := f.do(http.MethodGet, "/search/issues"+tc.query, tc.authorization, "")
			if err != nil {
				t.Fatal(err)
			}
			if r.Status != tc.want {
				t.Errorf("status = %d, want %d (body %s)", r.Status, tc.want, r.Body)
			}
		})
	}
}

func TestDuplicatesReallyDuplicate(t *testing.T) {
	t.Parallel()
	f := setup(t, github.Config{})
	first := f.create(t, issueBody("al_dup"))
	second := f.create(t, issueBody("al_dup"))

	if first.Number == second.Number || first.ID == second.ID {
		t.Errorf("two creates answered the same issue (%d, %d): GitHub has no idempotency key", first.Number, second.Number)
	}
	if got := f.gh.Effects("al_dup"); got != 2 {
		t.Errorf("Effects = %d, want 2", got)
	}
	res := f.search(t, "al_dup")
	if res.TotalCount != 2 || len(res.Items) != 2 {
		t.Fatalf("search = %+v, want both issues listed", res)
	}
	if res.Items[0].Number != second.Number || res.Items[1].Number != first.Number {
		t.Errorf("search order = #%d, #%d; want newest first", res.Items[0].Number, res.Items[1].Number)
	}
}

func TestRequestsRecordEveryHeader(t *testing.T) {
	t.Parallel()
	f := setup(t, github.Config{Token: "ghp_secret"})
	if _, err := f.do(http.MethodPost, "/repos/acme/support/issues", "Bearer ghp_secret", issueBody("al_1")); err != nil {
		t.Fatal(err)
	}
	if _, err := f.do(http.MethodGet, "/search/issues?q=al_1", "", ""); err != nil {
		t.Fatal(err)
	}

	reqs := f.gh.Requests()
	if len(reqs) != 2 {
		t.Fatalf("Requests() = %d, want 2", len(reqs))
	}
	want := []struct{ method, path, authorization string }{
		{http.MethodPost, "/repos/acme/support/issues", "Bearer ghp_secret"},
		{http.MethodGet, "/search/issues", ""},
	}
	for i, w := range want {
		r := reqs[i]
		if r.Method != w.method || r.Path != w.path || r.Header.Get("Authorization") != w.authorization {
			t.Errorf("request %d = %s %s Authorization %q, want %s %s %q", i, r.Method, r.Path, r.Header.Get("Authorization"), w.method, w.path, w.authorization)
		}
		if r.Header.Get("X-GitHub-Api-Version") != "2022-11-28" {
			t.Errorf("request %d: X-GitHub-Api-Version %q not recorded", i, r.Header.Get("X-GitHub-Api-Version"))
		}
	}
	reqs[0].Header.Set("Authorization", "changed")
	if got := f.gh.Requests()[0].Header.Get("Authorization"); got != "Bearer ghp_secret" {
		t.Errorf("Requests() shares its headers with the caller: got %q after a change", got)
	}
}

// TestTheRecipesLookupFindsTheIssue sends the lookup of docs/providers/github.md as actledger
// renders it: the path with {reference} replaced by the query-escaped external key.
func TestTheRecipesLookupFindsTheIssue(t *testing.T) {
	t.Parallel()
	f := setup(t, github.Config{})
	const ref = "al_0b6c9a58-3f43-4c1e-9d1e-2f1f6f0d3a11"
	is := f.create(t, `{"title":"t","body":"Printer jammed.\n\nactledger reference: `+ref+`","labels":[]}`)

	path := strings.ReplaceAll("/search/issues?q=repo:acme/support+is:issue+in:body+%22{reference}%22&per_page=10",
		"{reference}", url.QueryEscape(ref))
	var res searchResult
	r := f.must(t, http.MethodGet, path, "")
	r.Decode(t, &res)
	if r.Status != http.StatusOK || res.TotalCount != 1 || len(res.Items) != 1 || res.Items[0].HTMLURL != is.HTMLURL {
		t.Errorf("recipe lookup: status %d, %+v; want the one issue %s", r.Status, res, is.HTMLURL)
	}
}

// A search that times out answers 200 with incomplete_results true and
// none of the matches it did not reach, for as many searches as asked;
// then the search finds the issue again.
func TestSearchThatTimesOutSaysItsResultsAreIncomplete(t *testing.T) {
	t.Parallel()
	f := setup(t, github.Config{})
	f.create(t, issueBody("al_timeout"))
	f.gh.SetSearchTimeouts(2)
	for i := range 2 {
		if got := f.search(t, "al_timeout"); !got.IncompleteResults || len(got.Items) != 0 {
			t.Fatalf("search %d while timing out = %+v, want incomplete_results and no items", i+1, got)
		}
	}
	if got := f.search(t, "al_timeout"); got.IncompleteResults || len(got.Items) != 1 {
		t.Fatalf("search after the timeouts = %+v, want the issue, complete", got)
	}
}

// The issue list takes since (issues updated at or after it; the fake's
// are updated only when created), pages by page and per_page, and says
// rel="next" while more follow; SetListOutages makes it answer 503.
func TestListFiltersBySinceAndLinksTheNextPage(t *testing.T) {
	t.Parallel()
	f := setup(t, github.Config{})
	f.create(t, issueBody("al_old"))
	f.clock.Advance(time.Hour)
	since := f.clock.Now().UTC().Format(time.RFC3339)
	for i := range 3 {
		f.create(t, issueBody(fmt.Sprintf("al_%d", i)))
	}
	list := "/repos/acme/support/issues?state=all&sort=created&direction=asc&per_page=2&since=" + since
	var first, second []issue
	r := f.must(t, http.MethodGet, list, "")
	r.Decode(t, &first)
	if len(first) != 2 || first[0].Number != 2 || !strings.Contains(r.Header.Get("Link"), `page=2`) || !strings.Contains(r.Header.Get("Link"), `rel="next"`) {
		t.Fatalf("first page = %+v, Link %q; want issues 2 and 3 and a next page", first, r.Header.Get("Link"))
	}
	r = f.must(t, http.MethodGet, list+"&page=2", "")
	r.Decode(t, &second)
	if len(second) != 1 || second[0].Number != 4 || r.Header.Get("Link") != "" {
		t.Fatalf("second page = %+v, Link %q; want issue 4 and no next page", second, r.Header.Get("Link"))
	}
	f.gh.SetListOutages(1)
	if r := f.must(t, http.MethodGet, list, ""); r.Status != http.StatusServiceUnavailable {
		t.Fatalf("a list during an outage answered %d, want 503", r.Status)
	}
}
