package mcp_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/actledger/actledger/auth"
	"github.com/actledger/actledger/client"
	"github.com/actledger/actledger/internal/testpipeline"
)

// listed is the ids of the operations a list_operations result holds.
func listed(t *testing.T, res *sdk.CallToolResult) map[string]bool {
	t.Helper()
	if res.IsError {
		t.Fatalf("list_operations: %s", text(res))
	}
	raw, _ := json.Marshal(res.StructuredContent)
	var page struct {
		Operations []client.Operation `json:"operations"`
	}
	if err := json.Unmarshal(raw, &page); err != nil {
		t.Fatal(err)
	}
	ids := map[string]bool{}
	for _, op := range page.Operations {
		ids[op.ID] = true
	}
	return ids
}

// TestMCPToolsOfAScopeSeeAndAskForItsOwnOperationsOnly: over stdio's
// in-memory transport and streamable HTTP alike, an agent of scope
// supply-us gets not_found from get_operation for supply-eu's operation,
// finds none of supply-eu's in list_operations, and the action tool
// called with supply-eu's key is a key_in_use_elsewhere tool error that
// names nothing of it; supply-eu's agent sees its own (with its scope),
// and an agent of the whole tenant sees both scopes' operations.
func TestMCPToolsOfAScopeSeeAndAskForItsOwnOperationsOnly(t *testing.T) {
	t.Parallel()
	p := testpipeline.New(t, testpipeline.Options{ActionContract: orderContract})
	euAgent, usAgent := p.ScopedToken("supply-eu", auth.RoleAgent), p.ScopedToken("supply-us", auth.RoleAgent)
	params := map[string]any{"sku": "A-1", "qty": 2}
	eu := operationOf(t, call(t, inMemorySession(t, p, euAgent), "supplier_create_order",
		map[string]any{"key": "po-eu", "params": params, "approval_id": p.Approve(`{"sku":"A-1","qty":2}`, time.Hour).ID.String()}))
	us := operationOf(t, call(t, must(httpSession(t, p, usAgent)), "supplier_create_order",
		map[string]any{"key": "po-us", "params": params, "approval_id": p.Approve(`{"sku":"A-1","qty":2}`, time.Hour).ID.String()}))
	if eu.Scope == nil || *eu.Scope != "supply-eu" {
		t.Fatalf("supply-eu's operation has scope %v, want supply-eu", eu.Scope)
	}

	for name, session := range map[string]func(token string) *sdk.ClientSession{
		"in-memory": func(token string) *sdk.ClientSession { return inMemorySession(t, p, token) },
		"http":      func(token string) *sdk.ClientSession { return must(httpSession(t, p, token)) },
	} {
		t.Run(name, func(t *testing.T) {
			cs := session(usAgent)
			if code := errorCodeOf(t, call(t, cs, "get_operation", map[string]any{"id": eu.ID})); code != "not_found" {
				t.Errorf("supply-us get_operation of supply-eu's operation: %q, want not_found", code)
			}
			if ids := listed(t, call(t, cs, "list_operations", map[string]any{"limit": 100})); ids[eu.ID] || !ids[us.ID] {
				t.Errorf("supply-us list_operations = %v, want its own and none of supply-eu's", ids)
			}
			res := call(t, cs, "supplier_create_order", map[string]any{"key": "po-eu", "params": params,
				"approval_id": p.Approve(`{"sku":"A-1","qty":2}`, time.Hour).ID.String()})
			raw, _ := json.Marshal(res.StructuredContent)
			if code := errorCodeOf(t, res); code != "key_in_use_elsewhere" || strings.Contains(text(res), eu.ID) || strings.Contains(string(raw), `"operation"`) {
				t.Errorf("supply-us asks for supply-eu's key: %q, %s; want key_in_use_elsewhere naming nothing", code, text(res))
			}

			own := session(euAgent)
			if got := operationOf(t, call(t, own, "get_operation", map[string]any{"id": eu.ID})); got.ID != eu.ID {
				t.Errorf("supply-eu get_operation = %s, want %s", got.ID, eu.ID)
			}
			if ids := listed(t, call(t, session(p.Agent), "list_operations", map[string]any{"limit": 100})); !ids[eu.ID] || !ids[us.ID] {
				t.Errorf("the whole tenant's list_operations = %v, want both scopes' operations", ids)
			}
		})
	}
}
