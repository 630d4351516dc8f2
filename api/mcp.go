package api

import (
	"fmt"
	"net/http"
	"time"

	"github.com/actledger/actledger/auth"
)

// MCPBudget is how much longer than Config.RequestTimeout one POST /mcp
// may take: an MCP tool call may wait up to 50s for an operation to
// change (get_operation's wait_seconds), under the ~60s MCP clients allow.
const MCPBudget = 60 * time.Second

func mcpBudget(*http.Request) time.Duration { return MCPBudget }

// mcpOriginRule is the Origin rule of POST /mcp: http.CrossOriginProtection
// (Sec-Fetch-Site, else the Origin against the request's Host) with the
// allowed origins trusted besides. An entry that is not an origin
// (scheme://host[:port], nothing more) is an error naming it.
func mcpOriginRule(allowed []string) (*http.CrossOriginProtection, error) {
	rule := http.NewCrossOriginProtection()
	for _, origin := range allowed {
		if err := rule.AddTrustedOrigin(origin); err != nil {
			return nil, fmt.Errorf("api: Config.MCPAllowedOrigins: %w", err)
		}
	}
	return rule, nil
}

// errOriginNotAllowed answers a POST /mcp whose Origin is neither the
// server's own nor an allowed one.
var errOriginNotAllowed = errorf(http.StatusForbidden, "origin_not_allowed",
	"this Origin may not call MCP here: a browser page of another site (or a rebound DNS name) is refused; "+
		"a deployment lists the origins it trusts in MCP_ALLOWED_ORIGINS")

// mcpOrigin refuses, before the token is looked at, a POST /mcp that a
// browser page of another origin sent: MCP's streamable HTTP transport
// says servers MUST validate Origin against DNS rebinding and answer a
// present, invalid one with 403. A request without Origin (and without
// Sec-Fetch-Site) is not a browser's and is let through: agent runtimes
// send none. The bearer token is still required of every request; this
// keeps a browser from being used as the caller at all.
func (s *Server) mcpOrigin(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if err := s.mcpOrigins.Check(r); err != nil {
			s.log.WarnContext(r.Context(), "MCP request from another origin refused", "origin", r.Header.Get("Origin"),
				"sec_fetch_site", r.Header.Get("Sec-Fetch-Site"), "host", r.Host)
			s.writeError(w, r, errOriginNotAllowed)
			return
		}
		next.ServeHTTP(w, r)
	})
}

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
