package ledger_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/actledger/actledger/ledger"
)

// A client key is stored with a new operation, enqueued or proposed, and
// read back wherever the operation is; a replay under another client key
// is the same operation with its first client key; a conflict names the
// existing operation and records the conflicting attempt's client key.
func TestClientKeyIsKeptForTracingAndDecidesNothing(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	f := setup(t)
	const params, other = `{"sku":"A-1","qty":3}`, `{"sku":"A-1","qty":4}`
	approval := f.approve(t, params, 5)
	enqueue := func(clientKey, params string) (ledger.Operation, bool, error) {
		return f.store.Enqueue(ctx, ledger.EnqueueRequest{
			TenantID: f.tenant, TokenID: f.agent.TokenID, Action: action, Key: "po-37", ClientKey: clientKey,
			Provider: "acme", Params: []byte(params), ApprovalID: approval.ID,
		})
	}
	propose := func(clientKey, params string) (ledger.Operation, bool, error) {
		return f.store.Propose(ctx, ledger.ProposeRequest{
			TenantID: f.tenant, TokenID: f.agent.TokenID, Action: action, Key: "po-38", ClientKey: clientKey,
			Provider: "acme", Params: []byte(params), RequestTTL: time.Hour,
		})
	}
	for _, tc := range []struct {
		name   string
		submit func(clientKey, params string) (ledger.Operation, bool, error)
	}{
		{"enqueue", enqueue},
		{"propose", propose},
	} {
		first, replayed, err := tc.submit("tool-call-1", params)
		if err != nil || replayed || first.ClientKey == nil || *first.ClientKey != "tool-call-1" {
			t.Fatalf("%s: first = %+v, %v, %v; want a new operation with client key tool-call-1", tc.name, first, replayed, err)
		}
		if got, err := f.store.Get(ctx, ledger.WholeTenant(f.tenant), first.ID); err != nil || got.ClientKey == nil || *got.ClientKey != "tool-call-1" {
			t.Errorf("%s: read back: client key %v, %v", tc.name, got.ClientKey, err)
		}

		again, replayed, err := tc.submit("tool-call-2", params)
		if err != nil || !replayed || again.ID != first.ID || again.ClientKey == nil || *again.ClientKey != "tool-call-1" {
			t.Errorf("%s: under another client key = %v, %v, %v; want a replay of %s keeping client key tool-call-1", tc.name, again.ID, replayed, err, first.ID)
		}

		_, _, err = tc.submit("tool-call-3", other)
		var conflict *ledger.KeyConflictError
		if !errors.As(err, &conflict) || !errors.Is(err, ledger.ErrKeyConflict) || conflict.Existing.ID != first.ID || conflict.Existing.Status != first.Status {
			t.Fatalf("%s: other params = %v; want a *KeyConflictError naming %s", tc.name, err, first.ID)
		}
		events, err := f.store.Events(ctx, ledger.WholeTenant(f.tenant), first.ID)
		if err != nil {
			t.Fatal(err)
		}
		last := events[len(events)-1]
		var detail map[string]any
		if err := json.Unmarshal(last.Detail, &detail); err != nil || last.Kind != ledger.EventKeyConflict || detail["client_key"] != "tool-call-3" {
			t.Errorf("%s: last event %s %s; want the conflict, naming client key tool-call-3", tc.name, last.Kind, last.Detail)
		}
	}

	// Without a client key there is none.
	a := f.approve(t, params, 1)
	op, _, err := f.enqueue("po-39", params, a.ID)
	if err != nil || op.ClientKey != nil {
		t.Errorf("no client key given: %v, %v; want nil", op.ClientKey, err)
	}
}

// Concurrent enqueues, which share one enqueue_operations statement when
// they can, keep each caller's own client key.
func TestConcurrentEnqueuesKeepEachClientKey(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	f := setup(t)
	const params = `{"sku":"A-1"}`
	approval := f.approve(t, params, 100)
	var wg sync.WaitGroup
	errs := make([]error, 20)
	for i := range errs {
		wg.Go(func() {
			op, _, err := f.store.Enqueue(ctx, ledger.EnqueueRequest{
				TenantID: f.tenant, TokenID: f.agent.TokenID, Action: action, Key: fmt.Sprintf("po-%d", i),
				ClientKey: fmt.Sprintf("call-%d", i), Provider: "acme", Params: []byte(params), ApprovalID: approval.ID,
			})
			switch {
			case err != nil:
				errs[i] = err
			case op.ClientKey == nil || *op.ClientKey != fmt.Sprintf("call-%d", i):
				errs[i] = fmt.Errorf("po-%d answered client key %v", i, op.ClientKey)
			}
		})
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			t.Error(err)
		}
	}
	if n := f.count(t, `SELECT count(*) FROM operations WHERE client_key = 'call-' || substr(key, 4)`); n != len(errs) {
		t.Errorf("%d operations hold their own client key, want %d", n, len(errs))
	}
}
