package api

import (
	"net/http"
	"time"

	"github.com/actledger/actledger/auth"
)

// MCPBudget is how much longer than Config.RequestTimeout one POST /mcp
// may take: an MCP tool call may wait up to 50s for an operation to
// change (get_operation's wait_seconds), under the ~60s MCP clients allow.
const MCPBudget = 60 * time.Second

func mcpBudget(*http.Request) time.Duration { return MCPBudget }

// serveMCP is POST /mcp: the request is authenticated as an agent here;
// Config.MCP answers it, calling this API again with the same token.
func (s *Server) serveMCP(w http.ResponseWriter, r *http.Request, _ auth.Principal) {
	s.cfg.MCP.ServeHTTP(w, r)
}

// mcpPostOnly is GET and DELETE /mcp. MCP's streamable HTTP transport
// requires a server that offers no event stream to answer a client's GET
// with 405 (clients then stop asking), and a stateless server keeps no
// session a DELETE could end; the JSON 404 of unknown paths would read as a
// missing endpoint. No token is needed to learn which method to use.
func (s *Server) mcpPostOnly(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Allow", http.MethodPost)
	s.writeError(w, r, errorf(http.StatusMethodNotAllowed, "method_not_allowed", "MCP is served statelessly here: POST only, no event stream and no session"))
}
