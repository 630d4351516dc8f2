package stripe

import (
	"net/http"
	"slices"
	"strconv"
	"strings"
)

// searchResult is Stripe's search_result object.
type searchResult struct {
	Object   string          `json:"object"`
	URL      string          `json:"url"`
	HasMore  bool            `json:"has_more"`
	Data     []PaymentIntent `json:"data"`
	NextPage *string         `json:"next_page"`
}

// handleSearchIntents serves GET /v1/payment_intents/search?query=…[&limit=n][&page=…]. Only
// PaymentIntents older than the search lag are searched (Stripe: "data is searchable in less
// than a minute"); results are newest first.
func (s *Server) handleSearchIntents(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	if !q.Has("query") {
		writeError(w, http.StatusBadRequest, ErrorObject{
			Type: "invalid_request_error", Code: "parameter_missing", Param: "query",
			Message: "Missing required param: query.",
		})
		return
	}
	query, err := parseQuery(q.Get("query"))
	if err != nil {
		writeError(w, http.StatusBadRequest, ErrorObject{
			Type: "invalid_request_error", Param: "query", Message: err.Error(),
		})
		return
	}
	limit, ref := listLimit(q)
	if ref != nil {
		writeError(w, ref.status, ref.err)
		return
	}
	offset := 0
	if p := q.Get("page"); p != "" {
		n, err := strconv.Atoi(strings.TrimPrefix(p, "page_"))
		if !strings.HasPrefix(p, "page_") || err != nil || n < 0 {
			writeError(w, http.StatusBadRequest, ErrorObject{Type: "invalid_request_error", Param: "page", Message: "Invalid page: " + p})
			return
		}
		offset = n
	}

	s.mu.Lock()
	cutoff := s.now().Add(-s.lag)
	var match []PaymentIntent
	for _, pi := range slices.Backward(s.intents) {
		if pi.createdAt.After(cutoff) || !query.matches(pi) {
			continue
		}
		match = append(match, pi.clone())
	}
	s.mu.Unlock()

	res := searchResult{Object: "search_result", URL: "/v1/payment_intents/search", Data: []PaymentIntent{}}
	if offset < len(match) {
		match = match[offset:]
		if len(match) > limit {
			next := "page_" + strconv.Itoa(offset+limit)
			match, res.HasMore, res.NextPage = match[:limit], true, &next
		}
		res.Data = match
	}
	writeJSON(w, http.StatusOK, res)
}

// badQuery is a query the fake cannot run; its text is the message of the 400 answer, written
// as Stripe writes messages.
type badQuery string

func (e badQuery) Error() string { return string(e) }

// query is a parsed search query: clauses joined by AND (all must match) or by OR (any).
type query struct {
	clauses []clause
	or      bool
}

// clause is field op value, possibly negated.
type clause struct {
	negate bool
	field  string // amount, created, currency, customer, status, or metadata
	key    string // the metadata key
	op     string // ":", "<", ">", "<=", ">="
	value  string
	null   bool // value is the null token
}

// parseQuery parses the part of Stripe's search query language that applies to PaymentIntents:
// up to 10 clauses separated by spaces, AND or OR (not both); fields amount and created
// (numeric, with : < > <= >=), currency, customer, status and metadata["key"] (tokens: exact,
// case-insensitive match); string values in single or double quotes (a backslash escapes a
// quote); negation with a leading -; the null token for presence.
func parseQuery(text string) (query, error) {
	words, err := splitQuery(text)
	if err != nil {
		return query{}, err
	}
	var q query
	sawAnd, sawOr := false, false
	for i, w := range words {
		if i%2 == 1 {
			switch strings.ToUpper(w) {
			case "AND":
				sawAnd = true
				continue
			case "OR":
				sawOr = true
				continue
			}
		}
		c, err := parseClause(w)
		if err != nil {
			return query{}, err
		}
		q.clauses = append(q.clauses, c)
	}
	if len(q.clauses) == 0 {
		return query{}, badQuery("The query is empty.")
	}
	if sawAnd && sawOr {
		return query{}, badQuery("You can't combine AND and OR in the same query.")
	}
	if len(q.clauses) > 10 {
		return query{}, badQuery("A query can combine at most 10 clauses.")
	}
	q.or = sawOr
	return q, nil
}

// splitQuery splits text at spaces outside quotes, and inserts an implicit AND between two
// clauses that follow each other directly, so that words alternate clause, connective, clause.
func splitQuery(text string) ([]string, error) {
	var words []string
	var cur strings.Builder
	var quote rune
	escaped := false
	flush := func() {
		if cur.Len() == 0 {
			return
		}
		w := cur.String()
		cur.Reset()
		isConn := strings.EqualFold(w, "AND") || strings.EqualFold(w, "OR")
		if len(words)%2 == 1 && !isConn {
			words = append(words, "AND")
		}
		words = append(words, w)
	}
	for _, r := range text {
		switch {
		case escaped:
			cur.WriteRune(r)
			escaped = false
		case quote != 0 && r == '\\':
			cur.WriteRune(r)
			escaped = true
		case quote != 0:
			cur.WriteRune(r)
			if r == quote {
				quote = 0
			}
		case r == '\'' || r == '"':
			cur.WriteRune(r)
			quote = r
		case r == ' ' || r == '\t':
			flush()
		default:
			cur.WriteRune(r)
		}
	}
	if quote != 0 {
		return nil, badQuery("The query has an unterminated quoted value.")
	}
	flush()
	if len(words)%2 == 0 && len(words) > 0 {
		return nil, badQuery("The query ends with a connective.")
	}
	return words, nil
}

func parseClause(w string) (clause, error) {
	var c clause
	if rest, ok := strings.CutPrefix(w, "-"); ok {
		c.negate, w = true, rest
	}
	// The field: a name, or metadata[<quoted key>].
	if rest, ok := strings.CutPrefix(w, "metadata["); ok {
		key, n, err := unquote(rest)
		if err != nil || !strings.HasPrefix(rest[n:], "]") {
			return clause{}, badQuery("Invalid metadata clause: " + w)
		}
		c.field, c.key, w = "metadata", key, rest[n+1:]
	} else {
		i := strings.IndexAny(w, ":<>=~")
		if i <= 0 {
			return clause{}, badQuery("Invalid clause: " + w)
		}
		c.field, w = w[:i], w[i:]
		switch c.field {
		case "amount", "created", "currency", "customer", "status":
		default:
			return clause{}, badQuery("Field " + strconv.Quote(c.field) + " is not a supported search field for payment_intents.")
		}
	}
	for _, op := range []string{">=", "<=", ":", "<", ">", "~"} {
		if rest, ok := strings.CutPrefix(w, op); ok {
			c.op, w = op, rest
			break
		}
	}
	numeric := c.field == "amount" || c.field == "created"
	switch {
	case c.op == "":
		return clause{}, badQuery("Invalid clause operator in: " + w)
	case c.op == "~":
		return clause{}, badQuery("Substring matching is not supported on field " + c.field + ".")
	case c.op != ":" && !numeric:
		return clause{}, badQuery("Comparison operators are only supported on numeric fields, not " + c.field + ".")
	}
	switch {
	case strings.EqualFold(w, "null"):
		c.null = true
		if c.op != ":" {
			return clause{}, badQuery("null can only be used with ':'.")
		}
	case strings.HasPrefix(w, "'") || strings.HasPrefix(w, "\""):
		v, n, err := unquote(w)
		if err != nil || n != len(w) {
			return clause{}, badQuery("Invalid quoted value: " + w)
		}
		c.value = v
	case numeric:
		c.value = w
	default:
		return clause{}, badQuery("String values must be quoted: " + w)
	}
	if numeric && !c.null {
		if _, err := strconv.ParseInt(c.value, 10, 64); err != nil {
			return clause{}, badQuery("Invalid numeric value for " + c.field + ": " + c.value)
		}
	}
	return c, nil
}

// unquote reads a quoted string at the start of s and returns it and how many bytes it took.
func unquote(s string) (string, int, error) {
	if s == "" || (s[0] != '\'' && s[0] != '"') {
		return "", 0, badQuery("not quoted")
	}
	q := s[0]
	var b strings.Builder
	for i := 1; i < len(s); i++ {
		switch s[i] {
		case '\\':
			if i+1 < len(s) {
				i++
				b.WriteByte(s[i])
			}
		case q:
			return b.String(), i + 1, nil
		default:
			b.WriteByte(s[i])
		}
	}
	return "", 0, badQuery("unterminated")
}

func (q query) matches(pi *PaymentIntent) bool {
	for _, c := range q.clauses {
		m := c.matches(pi)
		if q.or && m {
			return true
		}
		if !q.or && !m {
			return false
		}
	}
	return !q.or
}

func (c clause) matches(pi *PaymentIntent) bool {
	var got string
	var present bool
	switch c.field {
	case "amount":
		got, present = strconv.FormatInt(pi.Amount, 10), true
	case "created":
		got, present = strconv.FormatInt(pi.Created, 10), true
	case "currency":
		got, present = pi.Currency, true
	case "status":
		got, present = pi.Status, true
	case "customer":
		if pi.Customer != nil {
			got, present = *pi.Customer, true
		}
	case "metadata":
		got, present = pi.Metadata[c.key]
	}
	var m bool
	switch {
	case c.null:
		m = !present || got == ""
	case !present:
		m = false
	case c.field != "amount" && c.field != "created":
		m = strings.EqualFold(got, c.value) // tokens match exactly, ignoring case
	default:
		g, _ := strconv.ParseInt(got, 10, 64)
		v, _ := strconv.ParseInt(c.value, 10, 64)
		switch c.op {
		case ":":
			m = g == v
		case "<":
			m = g < v
		case ">":
			m = g > v
		case "<=":
			m = g <= v
		case ">=":
			m = g >= v
		}
	}
	return m != c.negate
}
