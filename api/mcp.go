package api

import (
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"strings"
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

// ParseMCPHost reads one entry of Config.MCPAllowedHosts (MCP_ALLOWED_HOSTS):
// a host name ("agents.example.com"), an IPv4 address or a bracketed IPv6
// one ("[fd00::1]"), without scheme, port or path; the Host of a request
// then matches it with any port. It returns the entry as it is compared
// (lower case), or an error saying what it is not.
func ParseMCPHost(entry string) (string, error) {
	h := strings.ToLower(strings.TrimSuffix(entry, "."))
	if strings.HasPrefix(h, "[") && strings.HasSuffix(h, "]") {
		if a, err := netip.ParseAddr(h[1 : len(h)-1]); err == nil && a.Is6() && a.Zone() == "" {
			return "[" + a.String() + "]", nil
		}
		return "", fmt.Errorf("%q is not a bracketed IPv6 address such as [fd00::1]", entry)
	}
	if a, err := netip.ParseAddr(h); err == nil {
		if a.Is6() {
			return "", fmt.Errorf("%q: write an IPv6 address in brackets, as a Host header does ([%s])", entry, a)
		}
		return a.String(), nil
	}
	if !isDNSName(h) {
		return "", fmt.Errorf("%q is not a host name such as agents.example.com (no scheme, port, path or wildcard)", entry)
	}
	return h, nil
}

// isDNSName reports whether h is a host name: dot-separated labels of
// letters, digits and inner hyphens, 1 to 63 characters each, 253 in all.
func isDNSName(h string) bool {
	if h == "" || len(h) > 253 {
		return false
	}
	for label := range strings.SplitSeq(h, ".") {
		if label == "" || len(label) > 63 || label[0] == '-' || label[len(label)-1] == '-' {
			return false
		}
		for _, c := range label {
			if (c < 'a' || c > 'z') && (c < '0' || c > '9') && c != '-' {
				return false
			}
		}
	}
	return true
}

// mcpHostRule is the Host rule of POST /mcp (Config.MCPAllowedHosts).
type mcpHostRule struct {
	// allowed holds the configured hosts, as ParseMCPHost returns them.
	allowed map[string]bool
}

// newMCPHostRule checks every entry of Config.MCPAllowedHosts.
func newMCPHostRule(entries []string) (mcpHostRule, error) {
	rule := mcpHostRule{allowed: make(map[string]bool, len(entries))}
	for _, entry := range entries {
		h, err := ParseMCPHost(entry)
		if err != nil {
			return mcpHostRule{}, fmt.Errorf("api: Config.MCPAllowedHosts: %w", err)
		}
		rule.allowed[h] = true
	}
	return rule, nil
}

// judged says whether a request's Host is judged at all: always when
// hosts are configured (behind a proxy, they are the names the server
// answers to); otherwise when the request arrived on a loopback address
// of this machine (a loopback-bound listener, or loopback traffic into a
// wildcard one), which is where a rebound name lands. A server reached on
// another address with no hosts configured is judged by Origin and token.
func (rule mcpHostRule) judged(r *http.Request) bool {
	if len(rule.allowed) > 0 {
		return true
	}
	local, _ := r.Context().Value(http.LocalAddrContextKey).(net.Addr)
	tcp, ok := local.(*net.TCPAddr)
	return ok && tcp.IP.IsLoopback()
}

// admits says whether a request's Host is a loopback name or address
// (localhost, 127.0.0.0/8, [::1], any port) or a configured host.
func (rule mcpHostRule) admits(host string) bool {
	name := host
	if h, _, err := net.SplitHostPort(host); err == nil {
		name = h
		if strings.Contains(h, ":") {
			name = "[" + h + "]"
		}
	}
	name = strings.ToLower(strings.TrimSuffix(name, "."))
	if name == "localhost" {
		return true
	}
	if a, err := netip.ParseAddr(strings.Trim(name, "[]")); err == nil {
		if a.Unmap().IsLoopback() {
			return true
		}
		if a.Is6() {
			name = "[" + a.String() + "]"
		} else {
			name = a.String()
		}
	}
	return rule.allowed[name]
}

// errHostNotAllowed answers a POST /mcp whose Host is neither a loopback
// name nor a configured host.
var errHostNotAllowed = errorf(http.StatusForbidden, "host_not_allowed",
	"this Host may not call MCP here: a loopback-bound server answers MCP to localhost, 127.0.0.1 and [::1] only "+
		"(a rebound DNS name is refused); a deployment lists the names it is reached by in MCP_ALLOWED_HOSTS")

// mcpHost refuses, before the Origin and the token are looked at, a POST
// /mcp whose Host is foreign to a loopback-bound server: a page on a
// rebound DNS name (its Host and Origin both the attacker's name) passes
// the Origin rule as same-origin, so the Host is what tells it apart. The
// MCP transport asks servers to guard against DNS rebinding; its SDKs do
// it with exactly this allowlist of loopback Hosts when bound to
// localhost (see docs/trust-boundaries.md, "Who may call MCP over HTTP").
func (s *Server) mcpHost(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if s.mcpHosts.judged(r) && !s.mcpHosts.admits(r.Host) {
			s.log.WarnContext(r.Context(), "MCP request for a foreign Host refused", "host", r.Host,
				"origin", r.Header.Get("Origin"))
			s.writeError(w, r, errHostNotAllowed)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// mcpTransport is the check of POST /mcp's transport that runs before its
// token: the Host rule first, then the Origin rule.
func (s *Server) mcpTransport(next http.Handler) http.Handler {
	return s.mcpHost(s.mcpOrigin(next))
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
