package console_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"html"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/actledger/actledger/auth"
	"github.com/actledger/actledger/internal/testpipeline"
	"github.com/actledger/actledger/ledger"
)

// rowIDs are the operations an Operations page lists, in its order.
func rowIDs(t *testing.T, body string) []string {
	t.Helper()
	var ids []string
	for _, m := range regexp.MustCompile(`<tr id="row-([0-9a-f-]{36})">`).FindAllStringSubmatch(body, -1) {
		ids = append(ids, m[1])
	}
	return ids
}

// olderLink is the address of a page's "Older operations" link; empty on
// the last page.
func olderLink(body string) string {
	m := regexp.MustCompile(`<p class="pager"><a href="([^"]+)">Older operations`).FindStringSubmatch(body)
	if m == nil {
		return ""
	}
	return html.UnescapeString(m[1])
}

func idsOf(ops ...ledger.Operation) []string {
	out := make([]string, len(ops))
	for i, op := range ops {
		out[i] = op.ID.String()
	}
	return out
}

// TestOperationsPageFiltersByKeyStateActionProviderAndTime: each filter of
// the Operations page lists exactly the operations it names, newest first,
// and the row of the key found links to the operation's timeline, whose
// events show their time to the millisecond.
func TestOperationsPageFiltersByKeyStateActionProviderAndTime(t *testing.T) {
	t.Parallel()
	p := setup(t)
	review := inReview(t, p, "po-41", ledger.ReasonOutcomeUnknown, "ops-eu")
	po37 := p.Enqueue("po-37", `{"sku":"A-1","qty":1}`)
	ticket := p.EnqueueAction(testpipeline.OtherAction, "po-38", `{"title":"restock"}`)
	po39 := p.Enqueue("po-39", `{"sku":"A-2","qty":2}`)
	proposal := propose(t, p, "po-40", `{"sku":"A-3","qty":3}`)
	s := signIn(t, p, p.Operator)

	now := time.Now().UTC()
	local := func(t time.Time) string { return t.UTC().Format("2006-01-02T15:04") }
	tests := []struct {
		name  string
		query url.Values
		want  []ledger.Operation
	}{
		{"everything, newest first", nil, []ledger.Operation{proposal, po39, ticket, po37, review}},
		{"by key", url.Values{"key": {"po-37"}}, []ledger.Operation{po37}},
		{"by key of the other action", url.Values{"key": {"po-38"}}, []ledger.Operation{ticket}},
		{"by a key nobody used", url.Values{"key": {"po-99"}}, nil},
		{"by state", url.Values{"status": {"awaiting_approval"}}, []ledger.Operation{proposal}},
		{"in review", url.Values{"status": {"review"}}, []ledger.Operation{review}},
		{"by action", url.Values{"action": {testpipeline.OtherAction}}, []ledger.Operation{ticket}},
		{"by provider", url.Values{"provider": {"acme"}}, []ledger.Operation{proposal, po39, po37, review}},
		{"by state and provider", url.Values{"status": {"queued"}, "provider": {"acme"}}, []ledger.Operation{po39, po37}},
		{"by a client key nobody sent", url.Values{"client_key": {"call-1"}}, nil},
		{"from the future", url.Values{"since": {local(now.Add(time.Hour))}}, nil},
		{"until the past", url.Values{"until": {local(now.Add(-time.Hour))}}, nil},
		{"an hour around now", url.Values{"since": {local(now.Add(-time.Hour))}, "until": {local(now.Add(time.Hour))}},
			[]ledger.Operation{proposal, po39, ticket, po37, review}},
		{"RFC 3339 times", url.Values{"since": {now.Add(-time.Hour).Format(time.RFC3339)}, "key": {"po-39"}}, []ledger.Operation{po39}},
	}
	for _, tt := range tests {
		res := s.get("/console/operations?" + tt.query.Encode())
		if res.status != http.StatusOK {
			t.Errorf("%s: %d\n%s", tt.name, res.status, res.body)
			continue
		}
		if got, want := rowIDs(t, res.body), idsOf(tt.want...); !slices.Equal(got, want) {
			t.Errorf("%s: lists %v, want %v", tt.name, got, want)
		}
	}

	found := s.get("/console/operations?key=po-37")
	link := `href="/console/operations/` + po37.ID.String() + `"`
	if !strings.Contains(found.body, link) {
		t.Fatalf("the row of po-37 does not link to its timeline (%s):\n%s", link, found.body)
	}
	timeline := s.get("/console/operations/" + po37.ID.String())
	if timeline.status != http.StatusOK || !strings.Contains(timeline.body, "po-37") {
		t.Fatalf("po-37's timeline: %d\n%s", timeline.status, timeline.body)
	}
	ms := regexp.MustCompile(`<td>\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d{3}Z</td>`)
	if !ms.MatchString(timeline.body) {
		t.Errorf("the timeline's times do not show milliseconds:\n%s", timeline.body)
	}
}

// TestOperationsPagePagesLikeTheAPI: a page of the Operations page is a
// page of GET /v1/operations: the same operations in the same order, page
// after page, and the next page's link keeps the filter; a filtered list
// pages through exactly the operations it keeps.
func TestOperationsPagePagesLikeTheAPI(t *testing.T) {
	t.Parallel()
	p := setup(t)
	var acme []ledger.Operation
	for i := range 5 {
		acme = append(acme, p.Enqueue(fmt.Sprintf("po-%d", i), fmt.Sprintf(`{"sku":"A-%d","qty":1}`, i)))
		p.EnqueueAction(testpipeline.OtherAction, fmt.Sprintf("tk-%d", i), fmt.Sprintf(`{"title":"t%d"}`, i))
	}
	s := signIn(t, p, p.Operator)

	var api []string
	cursor := ""
	for {
		status, out := p.Do("GET", "/v1/operations?limit=3&cursor="+url.QueryEscape(cursor), p.Operator, "")
		if status != http.StatusOK {
			t.Fatalf("GET /v1/operations: %d %v", status, out)
		}
		for _, op := range out["operations"].([]any) {
			api = append(api, op.(map[string]any)["id"].(string))
		}
		next, _ := out["next_cursor"].(string)
		if next == "" {
			break
		}
		cursor = next
	}

	walk := func(first string) (ids []string, pages int) {
		for addr := first; addr != ""; pages++ {
			res := s.get(addr)
			if res.status != http.StatusOK {
				t.Fatalf("%s: %d\n%s", addr, res.status, res.body)
			}
			got := rowIDs(t, res.body)
			if len(got) > 3 {
				t.Fatalf("%s lists %d operations, want at most 3", addr, len(got))
			}
			ids = append(ids, got...)
			addr = olderLink(res.body)
			if addr != "" && !strings.HasPrefix(addr, "/console/operations?") {
				t.Fatalf("the next page's link %q leaves the Operations page", addr)
			}
		}
		return ids, pages
	}
	all, pages := walk("/console/operations?limit=3")
	if len(api) != 10 || !slices.Equal(all, api) || pages != 4 {
		t.Errorf("the console's pages list %v in %d pages; GET /v1/operations lists %v; want the same ten", all, pages, api)
	}
	slices.Reverse(acme)
	filtered, pages := walk("/console/operations?limit=3&provider=acme")
	if want := idsOf(acme...); !slices.Equal(filtered, want) || pages != 2 {
		t.Errorf("provider acme pages through %v in %d pages, want %v in 2", filtered, pages, want)
	}
}

// TestOperationsPageOfAScopeNeverShowsAnotherScopesOperations: signed in
// with a token of scope supply-us, the Operations page lists none of
// supply-eu's operations, by any filter, and no other tenant's; supply-eu's
// token and the whole tenant's list it.
func TestOperationsPageOfAScopeNeverShowsAnotherScopesOperations(t *testing.T) {
	t.Parallel()
	p := setup(t)
	euAgent := p.ScopedToken("supply-eu", auth.RoleAgent)
	approval := p.Approve(`{"sku":"E-1"}`, time.Hour)
	status, out := p.Do("POST", "/v1/operations", euAgent, fmt.Sprintf(`{"action":%q,"key":"po-eu-1","params":{"sku":"E-1"},"approval_id":%q}`, testpipeline.Action, approval.ID))
	if status != http.StatusCreated {
		t.Fatalf("supply-eu enqueues: %d %v", status, out)
	}
	eu := p.Operation(out)
	mine := p.Enqueue("po-whole-1", `{"sku":"W-1"}`)

	for _, who := range []struct {
		name  string
		token string
		want  []ledger.Operation
	}{
		{"supply-us", p.ScopedToken("supply-us", auth.RoleOperator), nil},
		{"supply-us approver", p.ScopedToken("supply-us", auth.RoleApprover), nil},
		{"another tenant", p.TokenFor("Other Corp.", auth.RoleOperator), nil},
		{"supply-eu", p.ScopedToken("supply-eu", auth.RoleOperator), []ledger.Operation{eu}},
		{"the whole tenant", p.Operator, []ledger.Operation{mine, eu}},
	} {
		s := signIn(t, p, who.token)
		for _, q := range []string{"", "key=po-eu-1", "status=queued", "provider=acme", "action=" + testpipeline.Action} {
			res := s.get("/console/operations?" + q)
			if res.status != http.StatusOK {
				t.Fatalf("%s, %q: %d", who.name, q, res.status)
			}
			got := rowIDs(t, res.body)
			if !slices.Contains(idsOf(who.want...), eu.ID.String()) && (slices.Contains(got, eu.ID.String()) || strings.Contains(res.body, `<span class="key">po-eu-1</span>`) || strings.Contains(res.body, eu.ID.String())) {
				t.Errorf("%s, %q: the page shows supply-eu's operation\n%s", who.name, q, res.body)
			}
			if q == "" && !slices.Equal(got, idsOf(who.want...)) {
				t.Errorf("%s: lists %v, want %v", who.name, got, idsOf(who.want...))
			}
		}
	}
}

// TestOperationsPageSaysWhatIsWrongWithItsFilter: input the page cannot
// read is answered 400 with the form and words naming the field, never a
// 500; an address that is merely stale (a cursor of another list, a bad
// limit) starts the list over.
func TestOperationsPageSaysWhatIsWrongWithItsFilter(t *testing.T) {
	t.Parallel()
	p := setup(t)
	op := p.Enqueue("po-1", `{"sku":"A-1"}`)
	s := signIn(t, p, p.Approver)
	bad := []struct {
		query url.Values
		says  string
	}{
		{url.Values{"status": {"done"}}, "State: not a state of the contract."},
		{url.Values{"since": {"yesterday"}}, "From: not a time"},
		{url.Values{"until": {"2026-13-01T00:00"}}, "Until: not a time"},
		{url.Values{"since": {"2026-12-01T10:00"}, "until": {"2026-12-01T09:00"}}, "From must be before Until."},
		{url.Values{"key": {strings.Repeat("k", 513)}}, "Key: at most 512 bytes"},
		{url.Values{"provider": {"\xff"}}, "Provider: at most 512 bytes of text."},
	}
	for _, tt := range bad {
		res := s.get("/console/operations?" + tt.query.Encode())
		if res.status != http.StatusBadRequest || !strings.Contains(html.UnescapeString(res.body), tt.says) ||
			!strings.Contains(res.body, `id="operations-filter"`) || len(rowIDs(t, res.body)) != 0 {
			t.Errorf("%v: %d, want 400 saying %q with the form\n%s", tt.query, res.status, tt.says, res.body)
		}
	}
	for _, q := range []string{"cursor=bm90LWEtY3Vyc29y", "cursor=%%%", "limit=-3", "limit=many", "cursor=" + url.QueryEscape(reviewCursor(t))} {
		res := s.get("/console/operations?" + q)
		if res.status != http.StatusOK || !slices.Equal(rowIDs(t, res.body), idsOf(op)) {
			t.Errorf("%s: %d, want the first page\n%s", q, res.status, res.body)
		}
	}
}

// reviewCursor is a cursor of another list of the console (the review
// queue's), as a stale address would carry it.
func reviewCursor(t *testing.T) string {
	t.Helper()
	p, err := json.Marshal(map[string]any{"e": true})
	if err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(map[string]any{"l": "review", "p": json.RawMessage(p)})
	if err != nil {
		t.Fatal(err)
	}
	return base64.RawURLEncoding.EncodeToString(b)
}

// TestOverviewShowsTheTenantsWorkByStateAndWhatWaitsLongest: with
// operations in several states, the overview's numbers are the tenant's
// true counts (the ledger counted with count(*) by the test), a scope sees
// only its own, and the oldest proposal, the oldest review item with its
// owner, and an open circuit are named.
func TestOverviewShowsTheTenantsWorkByStateAndWhatWaitsLongest(t *testing.T) {
	t.Parallel()
	p := setup(t)
	ctx := context.Background()
	first := inReview(t, p, "po-r1", ledger.ReasonOutcomeUnknown, "ops-eu")
	inReview(t, p, "po-r2", ledger.ReasonRetriesExhausted, "ops-us")
	oldest := propose(t, p, "po-p1", `{"sku":"P-1","qty":1}`)
	propose(t, p, "po-p2", `{"sku":"P-2","qty":2}`)
	euAgent := p.ScopedToken("supply-eu", auth.RoleAgent)
	status, out := p.Do("POST", "/v1/operations", euAgent, fmt.Sprintf(
		`{"action":%q,"key":"po-eu","params":{"sku":"E-1"},"request_approval":true,"reason":"EU"}`, testpipeline.Action))
	if status != http.StatusAccepted {
		t.Fatalf("supply-eu proposes: %d %v", status, out)
	}
	p.Start(1)
	var done []ledger.Operation
	for i := range 3 {
		done = append(done, p.Enqueue(fmt.Sprintf("po-s%d", i), fmt.Sprintf(`{"sku":"S-%d","qty":1}`, i)))
	}
	for _, op := range done {
		p.WaitStatus(op, ledger.StatusSucceeded, 30*time.Second)
	}
	fourth := p.Enqueue("po-s3", `{"sku":"S-3","qty":1}`)
	p.WaitStatus(fourth, ledger.StatusSucceeded, 30*time.Second)
	if _, err := p.Store.CircuitFailure(ctx, "beta", ledger.CircuitPolicy{Failures: 1, Cooldown: time.Minute, MaxCooldown: time.Hour}, false); err != nil {
		t.Fatal(err)
	}

	truth := map[ledger.Status]int64{}
	rows, _ := p.Pool.Query(ctx, `SELECT status, count(*) FROM operations WHERE tenant_id = $1 GROUP BY status`, p.TenantID)
	var st ledger.Status
	var n int64
	for rows.Next() {
		if err := rows.Scan(&st, &n); err != nil {
			t.Fatal(err)
		}
		truth[st] = n
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	want := map[ledger.Status]int64{ledger.StatusReview: 2, ledger.StatusAwaitingApproval: 3, ledger.StatusSucceeded: 4}
	if fmt.Sprint(truth) != fmt.Sprint(want) {
		t.Fatalf("the ledger holds %v, the test meant %v", truth, want)
	}

	counted := func(body string) map[ledger.Status]int64 {
		got := map[ledger.Status]int64{}
		for _, m := range regexp.MustCompile(`<td id="count-([a-z_]+)"><a href="[^"]*">(\d+)</a></td>`).FindAllStringSubmatch(body, -1) {
			v, _ := strconv.ParseInt(m[2], 10, 64)
			if m[1] != "all" && v != 0 {
				got[ledger.Status(m[1])] = v
			}
		}
		return got
	}
	for _, token := range []string{p.Operator, p.Approver} {
		res := signIn(t, p, token).get("/console/")
		if res.status != http.StatusOK {
			t.Fatalf("overview: %d\n%s", res.status, res.body)
		}
		if got := counted(res.body); fmt.Sprint(got) != fmt.Sprint(truth) {
			t.Errorf("the overview counts %v, the ledger holds %v", got, truth)
		}
		if !strings.Contains(res.body, `<td id="count-all"><a href="/console/operations">9</a>`) {
			t.Errorf("the overview's total is not 9")
		}
		section := func(id string) string {
			i := strings.Index(res.body, `id="`+id+`"`)
			if i < 0 {
				t.Fatalf("the overview has no %s:\n%s", id, res.body)
			}
			j := strings.Index(res.body[i:], "</section>")
			return res.body[i : i+j]
		}
		if s := section("oldest-proposal"); !strings.Contains(s, oldest.ID.String()) || !strings.Contains(s, "po-p1") {
			t.Errorf("the oldest proposal is not po-p1:\n%s", s)
		}
		if s := section("oldest-review"); !strings.Contains(s, first.ID.String()) || !strings.Contains(s, `<strong class="owner">ops-eu</strong>`) {
			t.Errorf("the oldest review item is not po-r1 of ops-eu:\n%s", s)
		}
		if s := section("open-circuits"); !strings.Contains(s, "<strong>beta</strong>") || strings.Contains(s, "acme") {
			t.Errorf("the open circuits are not beta's alone:\n%s", s)
		}
		if strings.Contains(res.body, "notifications-failing") {
			t.Errorf("the overview shows a notifications section with nothing failing")
		}
	}
	us := signIn(t, p, p.ScopedToken("supply-us", auth.RoleApprover)).get("/console/")
	if got := counted(us.body); len(got) != 0 || strings.Contains(us.body, "po-p1") {
		t.Errorf("supply-us's overview counts %v or names the tenant's proposal, want nothing of others' scopes", got)
	}
	eu := signIn(t, p, p.ScopedToken("supply-eu", auth.RoleApprover)).get("/console/")
	if got := counted(eu.body); fmt.Sprint(got) != fmt.Sprint(map[ledger.Status]int64{ledger.StatusAwaitingApproval: 1}) {
		t.Errorf("supply-eu's overview counts %v, want its one proposal", got)
	}
}
