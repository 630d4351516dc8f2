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
	ops, err := s.cfg.Ledger.OperationsPage(r.Context(), p.Access(), status, afterPtr, limit+1)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	next := ""
	if len(ops) > limit {
		ops = ops[:limit]
		last := ops[len(ops)-1]
		next = encodeCursor(operationsList, ledger.OperationsCursor{CreatedAt: last.CreatedAt, ID: last.ID})
	}
	views := make([]view.Operation, len(ops))
	for i, op := range ops {
		views[i] = view.OfOperation(op)
	}
	writeJSON(w, http.StatusOK, pageOut(map[string]any{"operations": views}, next))
}
