package mcp

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"strings"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/actledger/actledger/api"
	"github.com/actledger/actledger/client"
)

// WriteBudget is how long one POST /mcp may take to answer: the longest
// get_operation wait and a margin to read and write. The API route gives
// the request this much beyond its RequestTimeout, and the handler extends
// its connection's write deadline by it.
const WriteBudget = api.MCPBudget

// inProcessBase is the base URL of the in-process client; no request
// leaves the process, the host only names it in logs.
const inProcessBase = "http://actledger.in-process"

// serverKey carries the request's MCP server from Handler to the SDK's
// getServer, which may ask for it more than once per request.
type serverKey struct{}

// Handler serves MCP over streamable HTTP in stateless mode (POST /mcp).
// Each request gets a server whose tools call api in this process with
// the request's own bearer token, so authentication, the tenant and every
// rule are the API's. The API route in front of it (api.Config.MCP) has
// already refused a missing, unknown or revoked token (401) and a token of
// another role than agent (403).
func Handler(apiHandler http.Handler, cfg Config) http.Handler {
	log := cmp.Or(cfg.Logger, slog.Default()).With("component", "mcp")
	hc := &http.Client{Transport: client.HandlerTransport(apiHandler)}
	streamable := sdk.NewStreamableHTTPHandler(func(r *http.Request) *sdk.Server {
		s, _ := r.Context().Value(serverKey{}).(*sdk.Server)
		return s
	}, &sdk.StreamableHTTPOptions{
		Stateless: true, JSONResponse: true, Logger: log,
		// The SDK refuses a non-loopback Host on a loopback listener, a
		// guard against DNS rebinding, with no list of other names: behind
		// a reverse proxy in front of the loopback default LISTEN_ADDR it
		// would refuse every agent. The API route in front of this handler
		// holds the same guard with the names the deployment lists
		// (api.Config.MCPAllowedHosts, MCP_ALLOWED_HOSTS) and answers in
		// the API's error shape, so the SDK's is off.
		DisableLocalhostProtection: true,
	})
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if err := api.ExtendWriteDeadline(w, WriteBudget); err != nil {
			log.DebugContext(r.Context(), "cannot extend the write deadline of an MCP request", "err", err)
		}
		token := bearerToken(r)
		c := client.New(inProcessBase, token, client.Options{HTTPClient: hc, UserAgent: "actledger-mcp"})
		s, err := NewServer(r.Context(), c, cfg)
		if err != nil {
			writeAPIError(w, err)
			return
		}
		streamable.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), serverKey{}, s)))
	})
}

// bearerToken is the request's bearer token ("" when none; the API then
// answers 401 to every call).
func bearerToken(r *http.Request) string {
	scheme, token, ok := strings.Cut(r.Header.Get("Authorization"), " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return ""
	}
	return strings.TrimSpace(token)
}

// writeAPIError answers a request whose tool list could not be read with
// the API's refusal (its status and code), or 503.
func writeAPIError(w http.ResponseWriter, err error) {
	status, code, msg := http.StatusServiceUnavailable, "unavailable", "the tool list could not be read; retry later"
	var e *client.Error
	if errors.As(err, &e) && e.Status > 0 {
		status, code, msg = e.Status, e.Code, e.Message
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]any{"error": map[string]string{"code": code, "message": msg}})
}
