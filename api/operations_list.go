package api

import (
	"net/http"

	"github.com/actledger/actledger/auth"
	"github.com/actledger/actledger/ledger"
	"github.com/actledger/actledger/view"
)

// operationsList names the cursors of GET /v1/operations.
const operationsList = "operations"

// listOperations is GET /v1/operations[?status=S][&limit=N][&cursor=C]:
// a page of the tenant's operations, newest first. An agent uses it to
// find what it started (list_operations over MCP) without remembering ids.
// The console's Operations page reads the same list (ledger.OperationsPage)
// with more of its filters.
func (s *Server) listOperations(w http.ResponseWriter, r *http.Request, p auth.Principal) {
	limit, afterPtr, err := readPageAfter[ledger.OperationsCursor](r, operationsList)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	status := ledger.Status(r.URL.Query().Get("status"))
	if status != "" && !status.Valid() {
		s.writeError(w, r, errorf(http.StatusBadRequest, "invalid_query", "status: not a state of the contract ("+string(status)+")"))
		return
	}
	page, err := s.cfg.Ledger.OperationsPage(r.Context(), p.Access(), ledger.OperationsFilter{Status: status}, afterPtr, limit)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	next := ""
	if page.Next != nil {
		next = encodeCursor(operationsList, *page.Next)
	}
	views := make([]view.Operation, len(page.Operations))
	for i, op := range page.Operations {
		views[i] = view.OfOperation(op)
	}
	writeJSON(w, http.StatusOK, pageOut(map[string]any{"operations": views}, next))
}
