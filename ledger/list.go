package ledger

import (
	"cmp"
	"context"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
)

// DefaultListWindow is how many operations of the history one page of a
// list filtered by action, provider or client key reads at most
// (OperationsFilter.Window's default).
const DefaultListWindow = 2000

// operationsPage lists a tenant's operations, newest first, after a
// (created_at, id) position. It is the one list of operations: an agent's
// view of its own work (GET /v1/operations?status=) and the console's
// Operations page, scoped to the caller's access like every read.
//
// What an index answers narrows the rows read (scanned): the state (each
// open state has a partial index, the terminal ones are most of the
// history), the key and the time range. A key is found without reading
// the tenant's history: actions is a loose index scan of the unique
// (tenant_id, action, key) index, one descent per action the tenant has
// ever used, and each (action, key) is then one lookup of the same index:
// the actions are an array the index condition takes (action = ANY), as
// "IN (SELECT …)" was planned as a filter on every entry of the tenant's
// range of that index, to find one row (docs/benchmarks.md, "The large
// stage", "A run after schema 036 and 037").
// What no index answers (action, provider, client key) is a filter on at
// most @window scanned rows (all of which such a page reads: the window
// is sorted again before it is filtered); when the window fills before
// the page does,
// edge is the last scanned row, so the caller can offer the next window
// from there (OperationsPage.ScannedTo). Without such a filter the caller
// passes a window of the page's own size, and the list reads its page and
// nothing more.
const operationsPage = `WITH RECURSIVE actions AS (
    SELECT min(action) AS action FROM operations WHERE tenant_id = @tenant AND @key::text IS NOT NULL
    UNION ALL
    SELECT (SELECT min(action) FROM operations WHERE tenant_id = @tenant AND action > a.action)
    FROM actions a WHERE a.action IS NOT NULL
), scanned AS (
    SELECT o.* FROM operations o
    WHERE o.tenant_id = @tenant AND scope_admits(@scope, o.scope)
      AND (@status::text IS NULL OR o.status = @status::text)
      AND (@key::text IS NULL OR (o.action = ANY (ARRAY(SELECT action FROM actions)) AND o.key = @key::text))
      AND (@since::timestamptz IS NULL OR o.created_at >= @since::timestamptz)
      AND (@until::timestamptz IS NULL OR o.created_at < @until::timestamptz)
      AND (@before_at::timestamptz IS NULL OR (o.created_at, o.id) < (@before_at::timestamptz, @before_id::uuid))
    ORDER BY o.created_at DESC, o.id DESC
    LIMIT @window
), page AS (
    SELECT s.*, true AS matched FROM scanned s
    WHERE (@action::text IS NULL OR s.action = @action::text)
      AND (@provider::text IS NULL OR s.provider = @provider::text)
      AND (@client_key::text IS NULL OR s.client_key = @client_key::text)
    ORDER BY s.created_at DESC, s.id DESC
    LIMIT @limit
), edge AS (
    SELECT s.*, false AS matched FROM scanned s
    WHERE @windowed AND (SELECT count(*) FROM page) < @limit AND (SELECT count(*) FROM scanned) = @window
    ORDER BY s.created_at, s.id
    LIMIT 1
)
SELECT ` + operationColumns + `, o.matched
FROM (SELECT * FROM page UNION ALL SELECT * FROM edge) o JOIN tenants t ON t.id = o.tenant_id
ORDER BY o.matched DESC, o.created_at DESC, o.id DESC`

// OperationsCursor is the position of the last operation of a page.
type OperationsCursor struct {
	CreatedAt time.Time `json:"t"`
	ID        uuid.UUID `json:"id"`
}

// OperationsFilter narrows the list of operations; its zero value lists
// every operation the caller may see.
type OperationsFilter struct {
	// Status keeps one state.
	Status Status
	// Key keeps the operations of that key, of any action: the business
	// key for an action that declares one, else the caller's key.
	Key string
	// Action, Provider and ClientKey (the key a caller sent beside a
	// business key) keep the operations that have them; no index holds
	// them, so each page reads at most Window operations.
	Action, Provider, ClientKey string
	// Since and Until keep the operations created in [Since, Until); zero:
	// unbounded.
	Since, Until time.Time
	// Window bounds the operations one page reads when Action, Provider
	// or ClientKey is set. Default DefaultListWindow.
	Window int
}

// windowed reports whether f filters on what no index holds.
func (f OperationsFilter) windowed() bool {
	return f.Action != "" || f.Provider != "" || f.ClientKey != ""
}

// OperationsPage is one page of the list of operations.
type OperationsPage struct {
	Operations []Operation
	// Next is where the next page starts; nil on the last.
	Next *OperationsCursor
	// ScannedTo is set when the page holds fewer operations than asked for
	// but is not the last: its window of the history was read to there
	// (the creation time of the last operation it read), and Next goes on
	// from it.
	ScannedTo *time.Time
}

// listed is a row of operationsPage: an operation of the page (Matched),
// or the window's last scanned row.
type listed struct {
	Operation
	Matched bool `db:"matched"`
}

// OperationsPage returns at most limit operations that in may see and f
// keeps, newest first, after the position after (nil: from the newest),
// and where the next page starts.
func (s *Store) OperationsPage(ctx context.Context, in Access, f OperationsFilter, after *OperationsCursor, limit int) (OperationsPage, error) {
	rows, _ := s.pool.Query(ctx, operationsPage, operationsPageArgs(in, f, after, limit))
	got, err := pgx.CollectRows(rows, pgx.RowToStructByName[listed])
	if err != nil {
		return OperationsPage{}, fmt.Errorf("list operations: %w", err)
	}
	var page OperationsPage
	for _, r := range got {
		if r.Matched {
			page.Operations = append(page.Operations, r.Operation)
			continue
		}
		if len(page.Operations) <= limit {
			at := r.CreatedAt
			page.Next, page.ScannedTo = &OperationsCursor{CreatedAt: r.CreatedAt, ID: r.ID}, &at
		}
	}
	if len(page.Operations) > limit {
		page.Operations = page.Operations[:limit]
		last := page.Operations[limit-1]
		page.Next, page.ScannedTo = &OperationsCursor{CreatedAt: last.CreatedAt, ID: last.ID}, nil
	}
	return page, nil
}

// operationsPageArgs are operationsPage's parameters for a page of limit
// operations.
func operationsPageArgs(in Access, f OperationsFilter, after *OperationsCursor, limit int) pgx.StrictNamedArgs {
	var beforeAt *time.Time
	beforeID := uuid.Nil
	if after != nil {
		beforeAt, beforeID = &after.CreatedAt, after.ID
	}
	// One more than the page: its presence says another page follows.
	window := limit + 1
	if f.windowed() {
		window = max(window, cmp.Or(f.Window, DefaultListWindow))
	}
	var since, until *time.Time
	if !f.Since.IsZero() {
		since = &f.Since
	}
	if !f.Until.IsZero() {
		until = &f.Until
	}
	return pgx.StrictNamedArgs{
		"tenant": in.Tenant, "scope": in.scope(), "status": nullString(string(f.Status)), "key": nullString(f.Key),
		"action": nullString(f.Action), "provider": nullString(f.Provider), "client_key": nullString(f.ClientKey),
		"since": since, "until": until, "before_at": beforeAt, "before_id": beforeID,
		"window": window, "windowed": f.windowed(), "limit": limit + 1,
	}
}
