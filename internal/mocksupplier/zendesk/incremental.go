package zendesk

import (
	"encoding/base64"
	"fmt"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"time"
)

// The incremental ticket export's page sizes: "1000 items per page" by default, per_page up to
// 1000 (https://developer.zendesk.com/api-reference/ticketing/ticket-management/incremental_exports/).
const (
	exportDefaultPerPage = 1000
	exportMaxPerPage     = 1000
)

// exportAnswer is a page of the cursor-based incremental ticket export.
type exportAnswer struct {
	Tickets      []Ticket `json:"tickets"`
	AfterURL     *string  `json:"after_url"`
	AfterCursor  *string  `json:"after_cursor"`
	BeforeURL    *string  `json:"before_url"`
	BeforeCursor *string  `json:"before_cursor"`
	EndOfStream  bool     `json:"end_of_stream"`
}

// handleExport serves GET /api/v2/incremental/tickets/cursor[.json]?start_time=…|cursor=…
// [&per_page=n]: the tickets created or changed at or after start_time (unix seconds), oldest
// change first, a page at a time; after_cursor continues where this page ended, and
// end_of_stream says that the page reached the present. As Zendesk does, tickets changed within
// the minute before the request are left out ("any items that were created or changed within
// the minute prior to your request are excluded",
// https://developer.zendesk.com/documentation/ticketing/managing-tickets/using-the-incremental-export-api);
// a start_time less than a minute ago answers 400. The fake's tickets never change after they
// are created, so their change time is their creation time.
func (s *Server) handleExport(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	now := s.now()
	horizon := now.Add(-time.Minute)
	perPage := exportDefaultPerPage
	if v := q.Get("per_page"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > exportMaxPerPage {
			writeJSON(w, http.StatusBadRequest, errorBody{Error: "InvalidPaginationParameter", Description: "per_page must be between 1 and 1000"})
			return
		}
		perPage = n
	}
	// after is the position the page starts after: a change time and a ticket id.
	var afterAt time.Time
	var afterID int64 = -1
	switch {
	case q.Get("cursor") != "":
		at, id, ok := parseExportCursor(q.Get("cursor"))
		if !ok {
			writeJSON(w, http.StatusBadRequest, errorBody{Error: "InvalidPaginationParameter", Description: "cursor is not valid"})
			return
		}
		afterAt, afterID = at, id
	case q.Get("start_time") != "":
		sec, err := strconv.ParseInt(q.Get("start_time"), 10, 64)
		if err != nil || time.Unix(sec, 0).After(horizon) {
			writeJSON(w, http.StatusBadRequest, errorBody{Error: "InvalidValue", Description: "start_time must be an epoch time more than a minute in the past"})
			return
		}
		afterAt = time.Unix(sec, 0).Add(-time.Nanosecond)
	default:
		writeJSON(w, http.StatusBadRequest, errorBody{Error: "InvalidPaginationParameter", Description: "start_time or cursor is required"})
		return
	}
	s.mu.Lock()
	var changed []*Ticket
	for _, t := range s.tickets {
		at := t.created.Truncate(time.Second)
		if at.After(horizon) {
			continue
		}
		if at.After(afterAt) || (at.Equal(afterAt) && t.ID > afterID) {
			changed = append(changed, t)
		}
	}
	sort.SliceStable(changed, func(i, j int) bool {
		a, b := changed[i].created.Truncate(time.Second), changed[j].created.Truncate(time.Second)
		return a.Before(b) || (a.Equal(b) && changed[i].ID < changed[j].ID)
	})
	page := exportAnswer{Tickets: []Ticket{}, EndOfStream: len(changed) <= perPage}
	changed = changed[:min(len(changed), perPage)]
	for _, t := range changed {
		page.Tickets = append(page.Tickets, t.clone())
	}
	s.mu.Unlock()
	lastAt, lastID := afterAt, afterID
	if n := len(changed); n > 0 {
		lastAt, lastID = changed[n-1].created.Truncate(time.Second), changed[n-1].ID
	}
	cursor := exportCursor(lastAt, lastID)
	url := "https://" + r.Host + "/api/v2/incremental/tickets/cursor.json?cursor=" + cursor
	page.AfterCursor, page.AfterURL = &cursor, &url
	writeJSON(w, http.StatusOK, page)
}

// exportCursor is the fake's opaque cursor: where a page ended.
func exportCursor(at time.Time, id int64) string {
	return base64.RawURLEncoding.EncodeToString(fmt.Appendf(nil, "%d.%09d|%d", at.Unix(), at.Nanosecond(), id))
}

func parseExportCursor(c string) (time.Time, int64, bool) {
	raw, err := base64.RawURLEncoding.DecodeString(c)
	if err != nil {
		return time.Time{}, 0, false
	}
	at, id, ok := strings.Cut(string(raw), "|")
	sec, nsec, ok2 := strings.Cut(at, ".")
	s, err1 := strconv.ParseInt(sec, 10, 64)
	ns, err2 := strconv.ParseInt(nsec, 10, 64)
	n, err3 := strconv.ParseInt(id, 10, 64)
	if !ok || !ok2 || err1 != nil || err2 != nil || err3 != nil {
		return time.Time{}, 0, false
	}
	return time.Unix(s, ns), n, true
}
