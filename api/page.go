package api

import (
	"encoding/base64"
	"encoding/json"
	"net/http"
	"strconv"
)

// Page sizes of every list endpoint.
const (
	// DefaultPageLimit is a list's page size when the request gives no
	// limit.
	DefaultPageLimit = 100
	// MaxPageLimit is the largest limit a request may ask for; more is a
	// 400, never a silent cut.
	MaxPageLimit = 500
)

// pageRequest is a list request's limit and the position its cursor names.
type pageRequest struct {
	limit  int
	cursor string
}

// readPage reads ?limit= and ?cursor=. A cursor is opaque to clients: the
// next_cursor of the previous page, passed back unchanged.
func readPage(r *http.Request) (pageRequest, error) {
	q := r.URL.Query()
	p := pageRequest{limit: DefaultPageLimit, cursor: q.Get("cursor")}
	if s := q.Get("limit"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 || n > MaxPageLimit {
			return p, errorf(http.StatusBadRequest, "invalid_query", "limit: must be an integer from 1 to "+strconv.Itoa(MaxPageLimit))
		}
		p.limit = n
	}
	return p, nil
}

// cursorEnvelope binds a cursor to the list it came from, so one list's
// cursor is refused by another.
type cursorEnvelope struct {
	List     string          `json:"l"`
	Position json.RawMessage `json:"p"`
}

// encodeCursor makes the opaque next_cursor of list at position.
func encodeCursor(list string, position any) string {
	p, _ := json.Marshal(position)
	b, _ := json.Marshal(cursorEnvelope{List: list, Position: p})
	return base64.RawURLEncoding.EncodeToString(b)
}

// decodeCursor reads the position of list from the request's cursor into
// position; it reports false when the request has none.
func (p pageRequest) decodeCursor(list string, position any) (bool, error) {
	if p.cursor == "" {
		return false, nil
	}
	errCursor := errorf(http.StatusBadRequest, "invalid_cursor", "cursor: not a cursor of this list; pass next_cursor back unchanged")
	raw, err := base64.RawURLEncoding.DecodeString(p.cursor)
	if err != nil {
		return false, errCursor
	}
	var env cursorEnvelope
	if json.Unmarshal(raw, &env) != nil || env.List != list || json.Unmarshal(env.Position, position) != nil {
		return false, errCursor
	}
	return true, nil
}

// readPageAfter reads ?limit= and the position of list from ?cursor=:
// after is nil when the request starts at the beginning.
func readPageAfter[P any](r *http.Request, list string) (limit int, after *P, err error) {
	page, err := readPage(r)
	if err != nil {
		return 0, nil, err
	}
	var position P
	given, err := page.decodeCursor(list, &position)
	if err != nil || !given {
		return page.limit, nil, err
	}
	return page.limit, &position, nil
}

// pageOut adds next_cursor to a list's answer when there is more.
func pageOut(out map[string]any, next string) map[string]any {
	if next != "" {
		out["next_cursor"] = next
	}
	return out
}
