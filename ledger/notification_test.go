package ledger_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/actledger/actledger/ledger"
	"github.com/actledger/actledger/provider"
)

// pathFrom is the shortest way through the transition table from one
// state to another (to itself too, round a cycle), the states after from
// in order; nil when none leads there.
func pathFrom(from, to ledger.Status) []ledger.Status {
	seen := map[ledger.Status]bool{}
	queue := [][]ledger.Status{nil}
	for len(queue) > 0 {
		path := queue[0]
		queue = queue[1:]
		last := from
		if len(path) > 0 {
			last = path[len(path)-1]
		}
		for _, next := range ledger.Transitions[last] {
			p := append(slices.Clone(path), next)
			if next == to {
				return p
			}
			if !seen[next] {
				seen[next] = true
				queue = append(queue, p)
			}
		}
	}
	return nil
}

// notified is the types of the notifications written for what query finds
// (operation or evidence id), with their status.
func (f *fixture) notified(t *testing.T, query string, id any, status ledger.Status) []ledger.NotificationType {
	t.Helper()
	rows, _ := f.pool.Query(context.Background(), query, id, string(status))
	types, err := pgx.CollectRows(rows, pgx.RowTo[ledger.NotificationType])
	if err != nil {
		t.Fatal(err)
	}
	return types
}

// TestNotificationsOfEveryStateAreNotifiedType holds every writer of
// notifications to the one rule, NotifiedType, with a receiver that takes
// every event: each state a change leads to, reached by the shortest way
// from queued, gets from transition_operations (SQL) exactly the event
// NotifiedType names, or none; a new operation (queued) none; a proposal
// and unmatched evidence theirs. A state the SQL notified differently
// would reach receivers as the wrong event or not at all, and the relays
// would not be woken for it (Store.notifies reads NotifiedType).
func TestNotificationsOfEveryStateAreNotifiedType(t *testing.T) {
	t.Parallel()
	f := setup(t)
	ctx := context.Background()
	if _, err := f.store.SyncReceivers(ctx, "TEST.notify", []ledger.Receiver{
		{Name: "everything", Tenant: "acme-corp", Events: ledger.NotificationTypes},
	}); err != nil {
		t.Fatal(err)
	}
	const ofOperation = `SELECT type FROM notifications WHERE operation_id = $1 AND status = $2 ORDER BY at`
	want := func(s ledger.Status) []ledger.NotificationType {
		if n := ledger.NotifiedType(s); n != "" {
			return []ledger.NotificationType{n}
		}
		return nil
	}
	reached := map[ledger.Status]bool{}
	for i, to := range ledger.Statuses {
		path := pathFrom(ledger.StatusQueued, to)
		if path == nil {
			continue
		}
		op, _ := f.queued(t, fmt.Sprintf("po-%d", i), fmt.Sprintf(`{"sku":"A-%d"}`, i))
		if got := f.notified(t, ofOperation, op.ID, ledger.StatusQueued); !slices.Equal(got, want(ledger.StatusQueued)) {
			t.Errorf("enqueue: notified %v, want %v", got, want(ledger.StatusQueued))
		}
		for _, next := range path {
			c := ledger.Change{ID: op.ID, From: op.Status, Version: op.Version, To: next, Kind: "test_step", Actor: "test"}
			switch next {
			case ledger.StatusDispatching:
				c.LeaseOwner, c.LeaseFor = "test", time.Minute
			case ledger.StatusRetryWait, ledger.StatusUnknown:
				c.NextAttemptAt = time.Now().Add(time.Hour)
			case ledger.StatusReview:
				c.Review = &ledger.Review{Reason: ledger.ReasonOutcomeUnknown, Owner: "ops", Deadline: time.Now().Add(time.Hour)}
			}
			var err error
			if op, err = f.store.Transition(ctx, c); err != nil {
				t.Fatalf("%s → %s: %v", c.From, next, err)
			}
			if got := f.notified(t, ofOperation, op.ID, next); !slices.Equal(got, want(next)) {
				t.Errorf("%s → %s: notified %v, want %v", c.From, next, got, want(next))
			}
			reached[next] = true
		}
	}
	if len(reached) != len(ledger.Statuses)-1 {
		t.Errorf("changes reached %d states from queued, want every state but awaiting_approval: %v", len(reached), reached)
	}

	proposal, _, err := f.proposeIn(t, "", "po-ask", `{"sku":"B-1"}`)
	if err != nil {
		t.Fatal(err)
	}
	if got := f.notified(t, ofOperation, proposal.ID, proposal.Status); !slices.Equal(got, want(proposal.Status)) {
		t.Errorf("proposal (%s): notified %v, want %v", proposal.Status, got, want(proposal.Status))
	}
	ref := "ord_1"
	if _, err := f.store.RecordUnmatched(ctx, ledger.Unmatched{
		TenantID: &f.tenant, Provider: "acme", Source: "webhook:" + uuid.NewString(), Reference: "al_nobody",
		ProviderReference: &ref, Status: ledger.EvidenceSucceeded, Owner: "ops", Deadline: time.Now().Add(time.Hour),
	}, "acme-corp"); err != nil {
		t.Fatal(err)
	}
	const ofEvidence = `SELECT type FROM notifications WHERE evidence_id = (SELECT max(id) FROM unmatched_evidence WHERE reference = $1) AND status = $2`
	if got := f.notified(t, ofEvidence, "al_nobody", ledger.StatusReview); !slices.Equal(got, want(ledger.StatusReview)) {
		t.Errorf("unmatched evidence (review): notified %v, want %v", got, want(ledger.StatusReview))
	}
}

// TestNotificationTypesAreProviderEvents holds the ledger's notification
// types to the events a receiver may take in the providers file
// (provider.NotificationEvents), which the ledger does not import: a
// receiver's events are stored as the file spells them, and a type the
// ledger wrote under another word would reach nobody.
func TestNotificationTypesAreProviderEvents(t *testing.T) {
	t.Parallel()
	got := make([]string, len(ledger.NotificationTypes))
	for i, n := range ledger.NotificationTypes {
		got[i] = string(n)
	}
	if !slices.Equal(got, provider.NotificationEvents) {
		t.Errorf("ledger.NotificationTypes %v, provider.NotificationEvents %v; want the same words in the same order", got, provider.NotificationEvents)
	}
}
