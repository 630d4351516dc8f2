package api_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"testing"

	"github.com/actledger/actledger/auth"
	"github.com/actledger/actledger/client"
	"github.com/actledger/actledger/internal/testpipeline"
)

// TestOperationsListIsTenantScopedNewestFirstAndPaged: GET
// /v1/operations without action and key lists the token's tenant's
// operations, newest first, filtered by status, in pages whose cursors the
// client's All follows; another tenant sees none of them.
func TestOperationsListIsTenantScopedNewestFirstAndPaged(t *testing.T) {
	t.Parallel()
	p := testpipeline.New(t, testpipeline.Options{})
	ctx := context.Background()
	var ids []string
	for i := range 5 {
		op := p.Enqueue(fmt.Sprintf("po-%d", i), fmt.Sprintf(`{"sku":"A-1","qty":%d}`, i+1))
		ids = append(ids, op.ID.String())
	}
	if status, out := p.Propose("po-proposal", `{"sku":"B-1","qty":1}`); status != http.StatusAccepted {
		t.Fatalf("propose = %d %v", status, out)
	}
	agent := client.New(p.API.URL, p.Agent, client.Options{})

	queued, err := client.All(ctx, func(ctx context.Context, opts client.PageOptions) ([]client.Operation, string, error) {
		opts.Limit = 2
		page, err := agent.ListOperations(ctx, client.ListOperationsOptions{Status: client.StatusQueued, PageOptions: opts})
		if err != nil {
			return nil, "", err
		}
		if len(page.Operations) > 2 {
			t.Errorf("page of %d, want at most 2", len(page.Operations))
		}
		return page.Operations, page.NextCursor, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(queued) != 5 {
		t.Fatalf("queued operations = %d, want 5", len(queued))
	}
	for i, op := range queued {
		if want := ids[len(ids)-1-i]; op.ID != want || op.Status != client.StatusQueued {
			t.Errorf("operation %d = %s %s, want %s queued (newest first)", i, op.ID, op.Status, want)
		}
	}
	all, err := agent.ListOperations(ctx, client.ListOperationsOptions{})
	if err != nil || len(all.Operations) != 6 || all.Operations[0].Status != client.StatusAwaitingApproval {
		t.Fatalf("all operations = %+v, %v, want 6, the proposal first", all, err)
	}

	other := client.New(p.API.URL, p.TokenFor("Other Corp.", auth.RoleAgent), client.Options{})
	if page, err := other.ListOperations(ctx, client.ListOperationsOptions{}); err != nil || len(page.Operations) != 0 {
		t.Errorf("another tenant lists %+v, %v, want nothing", page, err)
	}
	_, err = agent.ListOperations(ctx, client.ListOperationsOptions{Status: "nonsense"})
	var apiErr *client.Error
	if !errors.As(err, &apiErr) || apiErr.Status != http.StatusBadRequest || apiErr.Code != "invalid_query" {
		t.Errorf("unknown status: %v, want a 400 invalid_query *client.Error", err)
	}
	// With one of action and key the route is still the lookup by key.
	if status, _ := p.Do("GET", "/v1/operations?action="+testpipeline.Action, p.Agent, ""); status != http.StatusBadRequest {
		t.Errorf("action without key = %d, want 400", status)
	}
}

// TestActionsListsEachActionsContract: GET /v1/actions gives every
// configured action with its description and params schema, which the MCP
// tools are built from.
func TestActionsListsEachActionsContract(t *testing.T) {
	t.Parallel()
	p := testpipeline.New(t, testpipeline.Options{ActionContract: `description: Order goods, params_schema: {type: object, required: [sku]}`})
	actions, err := client.New(p.API.URL, p.Agent, client.Options{}).ListActions(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(actions) != 2 || actions[0].Name != testpipeline.Action || actions[1].Name != testpipeline.OtherAction {
		t.Fatalf("actions = %+v, want %s and %s", actions, testpipeline.Action, testpipeline.OtherAction)
	}
	if a := actions[0]; a.Provider != "acme" || a.Description != "Order goods" || string(a.ParamsSchema) != `{"required":["sku"],"type":"object"}` {
		t.Errorf("action = %+v %s", a, a.ParamsSchema)
	}
	if s := string(actions[1].ParamsSchema); s != "null" {
		t.Errorf("an action without a schema has params_schema %s, want null", s)
	}
	if _, err := client.New(p.API.URL, "nope", client.Options{}).ListActions(context.Background()); client.Code(err) != "unauthenticated" {
		t.Errorf("unknown token: %v, want unauthenticated", err)
	}
}
