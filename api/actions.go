package api

import (
	"maps"
	"net/http"
	"slices"

	"github.com/actledger/actledger/auth"
)

// actionView is one entry of GET /v1/actions: what an agent (or its MCP
// tool list) needs to call the action. ParamsSchema is the action's JSON
// Schema 2020-12 for params; null accepts any JSON object. BusinessKey is
// the action's key expression, null when it has none: with one, the
// server derives the operation's key from the params and a caller's key
// is optional.
type actionView struct {
	Name         string  `json:"name"`
	Provider     string  `json:"provider"`
	Description  string  `json:"description"`
	ParamsSchema any     `json:"params_schema"`
	BusinessKey  *string `json:"business_key"`
}

// listActions is GET /v1/actions: the configured actions and their
// contracts, sorted by name. The MCP server builds its tools from it, so a
// tool's schema is the one the API enforces.
func (s *Server) listActions(w http.ResponseWriter, r *http.Request, _ auth.Principal) {
	views := make([]actionView, 0, len(s.actions))
	for _, name := range slices.Sorted(maps.Keys(s.actions)) {
		c := s.contract(name)
		v := actionView{Name: name, Provider: s.actions[name], Description: c.Description, ParamsSchema: c.ParamsSchema}
		if c.HasBusinessKey() {
			v.BusinessKey = &c.Key
		}
		views = append(views, v)
	}
	writeJSON(w, http.StatusOK, map[string]any{"actions": views})
}
