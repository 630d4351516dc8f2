package mcp_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/actledger/actledger/client"
	"github.com/actledger/actledger/internal/testpipeline"
)

// purchaseOrderContract declares a business key: one operation per
// purchase order, whatever key the model sends.
const purchaseOrderContract = `description: Order goods from the supplier, key: '"po-" + string(params.purchase_order)', ` +
	`params_schema: {type: object, required: [purchase_order, sku, qty], additionalProperties: false, ` +
	`properties: {purchase_order: {type: integer}, sku: {type: string}, qty: {type: integer, minimum: 1}}}`

// The tool of an action with a business key does not require a key, and
// says the server derives it; the tool of an action without one still
// requires it.
func TestBusinessKeyToolDoesNotRequireAKeyAndSaysTheServerDerivesIt(t *testing.T) {
	t.Parallel()
	p := testpipeline.New(t, testpipeline.Options{ActionContract: purchaseOrderContract})
	for name, cs := range map[string]*sdk.ClientSession{"in-memory": inMemorySession(t, p, p.Agent), "http": must(httpSession(t, p, p.Agent))} {
		res, err := cs.ListTools(context.Background(), nil)
		if err != nil {
			t.Fatalf("%s: list tools: %v", name, err)
		}
		for _, tool := range res.Tools {
			raw, _ := json.Marshal(tool.InputSchema)
			var s struct {
				Properties struct {
					Key struct {
						Description string `json:"description"`
					} `json:"key"`
				} `json:"properties"`
				Required []string `json:"required"`
			}
			if err := json.Unmarshal(raw, &s); err != nil {
				t.Fatal(err)
			}
			switch tool.Name {
			case "supplier_create_order":
				if strings.Join(s.Required, ",") != "params" {
					t.Errorf("%s: %s requires %v, want params only", name, tool.Name, s.Required)
				}
				for what, text := range map[string]string{"tool description": tool.Description, "key description": s.Properties.Key.Description} {
					if !strings.Contains(text, "server derives the operation's key from params") || !strings.Contains(text, `"po-" + string(params.purchase_order)`) {
						t.Errorf("%s: %s %q, want it to say the server derives the key, and how", name, what, text)
					}
				}
			case "ticket_open":
				if strings.Join(s.Required, ",") != "key,params" {
					t.Errorf("%s: %s requires %v, want key, params", name, tool.Name, s.Required)
				}
			}
		}
	}
}

// A model that calls the tool for one purchase order without a key, then
// under a key of its own, gets one operation; other params for that
// purchase order are a tool error naming the operation, and nothing more
// is sent.
func TestBusinessKeyToolCallsOfOnePurchaseOrderAreOneOperation(t *testing.T) {
	t.Parallel()
	p := testpipeline.New(t, testpipeline.Options{ActionContract: purchaseOrderContract})
	p.Start(1)
	cs := must(httpSession(t, p, p.Agent))
	params := map[string]any{"purchase_order": 37, "sku": "A-1", "qty": 2}
	approval := p.Approve(`{"purchase_order":37,"sku":"A-1","qty":2}`, time.Hour)

	first := operationOf(t, call(t, cs, "supplier_create_order", map[string]any{"params": params, "approval_id": approval.ID.String()}))
	if first.Key != "po-37" || first.ClientKey != nil {
		t.Fatalf("first call: key %q, client key %v; want po-37 and none", first.Key, first.ClientKey)
	}
	again := operationOf(t, call(t, cs, "supplier_create_order", map[string]any{"key": "tool-call-2", "params": params, "request_approval": true}))
	if again.ID != first.ID {
		t.Fatalf("the same purchase order under a key of the model's: operation %s, want %s", again.ID, first.ID)
	}
	done := operationOf(t, call(t, cs, "get_operation", map[string]any{"id": first.ID, "wait_seconds": 30}))
	if done.Status != client.StatusSucceeded {
		t.Fatalf("operation is %s, want succeeded", done.Status)
	}

	changed := call(t, cs, "supplier_create_order", map[string]any{
		"key": "tool-call-3", "params": map[string]any{"purchase_order": 37, "sku": "A-1", "qty": 9}, "request_approval": true,
	})
	if code := errorCodeOf(t, changed); code != "key_reused_with_different_params" {
		t.Fatalf("other params for purchase order 37: code %q, want key_reused_with_different_params", code)
	}
	if !strings.Contains(text(changed), first.ID) || !strings.Contains(text(changed), "succeeded") {
		t.Errorf("tool error text %q, want it to name operation %s and its status", text(changed), first.ID)
	}
	raw, _ := json.Marshal(changed.StructuredContent)
	var out struct {
		Error struct {
			Operation *client.OperationRef `json:"operation"`
		} `json:"error"`
	}
	if err := json.Unmarshal(raw, &out); err != nil || out.Error.Operation == nil || out.Error.Operation.ID != first.ID ||
		out.Error.Operation.Status != client.StatusSucceeded || out.Error.Operation.Summary == "" {
		t.Errorf("structured error %s, want it to name operation %s, succeeded, with its summary", raw, first.ID)
	}
	p.Settled(10 * time.Second)
	if orders, creates := p.Supplier.TotalOrders(), len(p.Supplier.CreateRequests(first.ExternalKey)); orders != 1 || creates != 1 {
		t.Errorf("supplier has %d orders from %d create requests, want 1 from 1", orders, creates)
	}
}
