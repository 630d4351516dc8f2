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
