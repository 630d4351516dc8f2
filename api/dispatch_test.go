package api_test

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/actledger/actledger/auth"
	"github.com/actledger/actledger/internal/testoutbox"
	"github.com/actledger/actledger/ledger"
)

// Actions of the fixture besides action: another on provider acme, one on
// beta.
const (
	cancelAction = "supplier.cancel_order"
	ticketAction = "ticket.open"
)

// pausedScopes lists the pauses of a dispatch answer as "provider/action",
// "*" for any, sorted.
func pausedScopes(r response) []string {
	list, _ := r.body["paused"].([]any)
	scopes := []string{}
	for _, p := range list {
		m := p.(map[string]any)
		scope := func(k string) string {
			if s, _ := m[k].(string); s != "" {
				return s
			}
			return "*"
		}
		scopes = append(scopes, scope("provider")+"/"+scope("action"))
	}
	slices.Sort(scopes)
	return scopes
}

func TestResumeRemovesEveryPauseWithinItsScope(t *testing.T) {
	t.Parallel()
	f := setup(t)
	all := []string{`{}`, `{"provider":"acme"}`, `{"provider":"acme","action":"supplier.create_order"}`,
		`{"action":"supplier.create_order"}`, `{"provider":"beta"}`}
	tests := []struct {
		name    string
		paused  []string
		resume  string
		removed int
		left    []string
	}{
		{"empty scope clears every pause", all, `{}`, 5, []string{}},
		{"empty body clears every pause", all, ``, 5, []string{}},
		{"a provider clears its pauses whatever their action", all, `{"provider":"acme"}`, 2,
			[]string{"*/*", "*/supplier.create_order", "beta/*"}},
		{"an action clears its pauses whatever their provider", all, `{"action":"supplier.create_order"}`, 2,
			[]string{"*/*", "acme/*", "beta/*"}},
		{"provider and action clear exactly that pause", all, `{"provider":"acme","action":"supplier.create_order"}`, 1,
			[]string{"*/*", "*/supplier.create_order", "acme/*", "beta/*"}},
		{"a pause of every provider is not within one provider", []string{`{}`}, `{"provider":"acme"}`, 0, []string{"*/*"}},
		{"nothing paused is not an error", nil, `{}`, 0, []string{}},
		{"a repeated pause is one pause", []string{`{"provider":"beta"}`, `{"provider":"beta"}`}, `{"provider":"beta"}`, 1, []string{}},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			operator := f.token(t, fmt.Sprintf("tenant-%d", i), auth.RoleOperator)
			for _, p := range tt.paused {
				if r := f.do(t, "POST", "/v1/dispatch/pause", operator, []byte(p)); r.status != 200 {
					t.Fatalf("pause %s: %d %s", p, r.status, r.raw)
				}
			}
			r := f.do(t, "POST", "/v1/dispatch/resume", operator, []byte(tt.resume))
			if r.status != 200 {
				t.Fatalf("resume: got %d %s, want 200", r.status, r.raw)
			}
			if got := r.body["removed"]; got != float64(tt.removed) {
				t.Errorf("removed = %v, want %d", got, tt.removed)
			}
			if got := pausedScopes(r); !slices.Equal(got, tt.left) {
				t.Errorf("pauses left = %v, want %v", got, tt.left)
			}
			if got := pausedScopes(f.do(t, "GET", "/v1/dispatch", operator, nil)); !slices.Equal(got, tt.left) {
				t.Errorf("GET /v1/dispatch pauses = %v, want %v", got, tt.left)
			}
			again := f.do(t, "POST", "/v1/dispatch/resume", operator, []byte(tt.resume))
			if again.status != 200 || again.body["removed"] != float64(0) {
				t.Errorf("the same resume again: %d %s, want 200 with removed 0", again.status, again.raw)
			}
		})
	}
}

// move takes operation id through the ledger's transitions to status to
// (via a claim), with next as its next_attempt_at.
func (f *fixture) move(t *testing.T, id string, to ledger.Status, next time.Time) ledger.Operation {
	t.Helper()
	ctx := context.Background()
	opID := uuid.MustParse(id)
	claimed, err := f.store.Transition(ctx, ledger.Change{
		ID: opID, From: ledger.StatusQueued, Version: 1, To: ledger.StatusDispatching, Kind: "claimed", Actor: "worker:test",
		LeaseOwner: "worker:test", LeaseUntil: f.clock.Now().Add(time.Minute),
	})
	if err != nil {
		t.Fatal(err)
	}
	c := ledger.Change{ID: opID, From: ledger.StatusDispatching, Version: claimed.Version, To: to, Kind: "provider_answered", Actor: "worker:test", NextAttemptAt: next}
	if to == ledger.StatusSucceeded {
		c.ProviderReference = "ord_1"
	}
	op, err := f.store.Transition(ctx, c)
	if err != nil {
		t.Fatal(err)
	}
	return op
}

// pendingDispatches returns, per operation, the dispatch messages waiting
// in the outbox.
func (f *fixture) pendingDispatches(t *testing.T) map[uuid.UUID][]pendingDispatch {
	t.Helper()
	rows, err := f.pool.Query(context.Background(), `SELECT payload, deliver_after FROM outbox WHERE published_at IS NULL ORDER BY id`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	out := make(map[uuid.UUID][]pendingDispatch)
	for rows.Next() {
		var payload []byte
		var p pendingDispatch
		if err := rows.Scan(&payload, &p.due); err != nil {
			t.Fatal(err)
		}
		var d ledger.Dispatch
		if err := json.Unmarshal(payload, &d); err != nil {
			t.Fatal(err)
		}
		p.version = d.Version
		out[d.OperationID] = append(out[d.OperationID], p)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

type pendingDispatch struct {
	version int64
	due     *time.Time
}

// TestResumeReleasesRetryWaitAndUnknownAtTheirSchedule: an operation
// waiting for a retry or a lookup whose scheduled message arrived during
// the pause (its claim refused, the message acknowledged) gets a new
// message on resume, due at its next_attempt_at and never before, instead
// of waiting minutes for the stuck sweeper.
func TestResumeReleasesRetryWaitAndUnknownAtTheirSchedule(t *testing.T) {
	t.Parallel()
	f := setup(t)
	ctx := context.Background()
	approval := f.approve(t, `{"sku":"A-1"}`, `,"max_uses":5`)
	if r := f.do(t, "POST", "/v1/dispatch/pause", f.operator, []byte(`{"provider":"acme"}`)); r.status != 200 {
		t.Fatalf("pause: %d %s", r.status, r.raw)
	}
	ids := map[string]string{}
	for _, key := range []string{"queued", "retry_wait", "unknown", "scheduled", "succeeded"} {
		r := f.do(t, "POST", "/v1/operations", f.agent, opBody(key, `{"sku":"A-1"}`, approval))
		if r.status != 201 {
			t.Fatalf("create %s: %d %s", key, r.status, r.raw)
		}
		ids[key] = r.str("id")
	}
	now := f.clock.Now()
	later, earlier := now.Add(time.Hour).Truncate(time.Microsecond), now.Add(-time.Minute).Truncate(time.Microsecond)
	f.move(t, ids["retry_wait"], ledger.StatusRetryWait, later)
	f.move(t, ids["unknown"], ledger.StatusUnknown, earlier)
	scheduled := f.move(t, ids["scheduled"], ledger.StatusRetryWait, later)
	f.move(t, ids["succeeded"], ledger.StatusSucceeded, time.Time{})
	// Every message so far was delivered (and refused while paused); the
	// "scheduled" operation's next message still waits in the outbox.
	if _, err := f.pool.Exec(ctx, `UPDATE outbox SET published_at = now()`); err != nil {
		t.Fatal(err)
	}
	subject := f.app.Broker.DispatchSubject("acme")
	if err := testoutbox.InsertErr(ctx, f.pool, ledger.DispatchMessage{Subject: subject, OperationID: scheduled.ID, Version: scheduled.Version, DeliverAfter: later}.Outbox()); err != nil {
		t.Fatal(err)
	}

	r := f.do(t, "POST", "/v1/dispatch/resume", f.operator, []byte(`{"provider":"acme"}`))
	if r.status != 200 || r.body["released"] != float64(3) || r.body["removed"] != float64(1) {
		t.Fatalf("resume: %d %s, want 200 with removed 1 and released 3", r.status, r.raw)
	}
	pending := f.pendingDispatches(t)
	tests := []struct {
		key  string
		due  *time.Time // nil: at once
		none bool       // no new message
	}{
		{key: "queued"},
		{key: "retry_wait", due: &later},
		{key: "unknown", due: &earlier},
		{key: "scheduled", due: &later}, // its own message only, not a second one
		{key: "succeeded", none: true},
	}
	for _, tt := range tests {
		id := uuid.MustParse(ids[tt.key])
		got := pending[id]
		if tt.none {
			if len(got) != 0 {
				t.Errorf("%s: %d messages waiting, want none", tt.key, len(got))
			}
			continue
		}
		if len(got) != 1 {
			t.Errorf("%s: %d messages waiting, want 1", tt.key, len(got))
			continue
		}
		op, err := f.store.GetInternal(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		switch {
		case got[0].version != op.Version:
			t.Errorf("%s: message for version %d, want the current %d", tt.key, got[0].version, op.Version)
		case tt.due == nil && got[0].due != nil:
			t.Errorf("%s: due at %v, want at once", tt.key, got[0].due)
		case tt.due != nil && (got[0].due == nil || !got[0].due.Equal(*tt.due)):
			t.Errorf("%s: due at %v, want %v (its next_attempt_at)", tt.key, got[0].due, *tt.due)
		}
	}
}
