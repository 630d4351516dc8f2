package ledger_test

import (
	"bytes"
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/actledger/actledger/ledger"
)

// announcements returns the review announcements waiting in the outbox,
// each with its subject, decoded strictly: a key that ReviewAnnouncement
// does not name fails the test.
func (f *fixture) announcements(t *testing.T) map[string]ledger.ReviewAnnouncement {
	t.Helper()
	rows, err := f.pool.Query(context.Background(), `SELECT subject, payload FROM outbox WHERE subject LIKE 'TEST.review.%'`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	out := make(map[string]ledger.ReviewAnnouncement)
	for rows.Next() {
		var subject string
		var payload []byte
		if err := rows.Scan(&subject, &payload); err != nil {
			t.Fatal(err)
		}
		dec := json.NewDecoder(bytes.NewReader(payload))
		dec.DisallowUnknownFields()
		var a ledger.ReviewAnnouncement
		if err := dec.Decode(&a); err != nil {
			t.Fatalf("announcement on %s: %v\n%s", subject, err, payload)
		}
		out[subject] = a
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestReviewAnnouncementsOfSQLAndGoShareOneShape: an operation's review
// announcement is written by transition_operations (SQL), unmatched
// evidence's by RecordUnmatched (Go). Both go on ReviewSubject's subject of
// their tenant (or of nobody's) and decode as ReviewAnnouncement, which is
// what a replay reads.
func TestReviewAnnouncementsOfSQLAndGoShareOneShape(t *testing.T) {
	t.Parallel()
	f := setup(t)
	ctx := context.Background()
	const prefix = "TEST.review"

	op2, _ := f.queued(t, "po-2", `{"sku":"A-2"}`)
	claimed, err := f.store.Transition(ctx, ledger.Change{
		ID: op2.ID, From: ledger.StatusQueued, Version: op2.Version, To: ledger.StatusDispatching, Kind: ledger.EventClaimed,
		Actor: "worker:test", LeaseOwner: "test", LeaseFor: time.Minute,
	})
	if err != nil {
		t.Fatal(err)
	}
	reviewed, err := f.store.Transition(ctx, ledger.Change{
		ID: op2.ID, From: ledger.StatusDispatching, Version: claimed.Version, To: ledger.StatusReview, Kind: ledger.EventNeedsReview,
		Actor: "worker:test", Review: &ledger.Review{Reason: ledger.ReasonOutcomeUnknown, Owner: "ops", Deadline: time.Now().Add(time.Hour)},
	})
	if err != nil {
		t.Fatal(err)
	}
	ref := "ord_9"
	for _, tenant := range []*uuid.UUID{&f.tenant, nil} {
		if _, err := f.store.RecordUnmatched(ctx, ledger.Unmatched{
			TenantID: tenant, Provider: "acme", Source: "webhook:" + uuid.NewString(), Reference: "al_nobody",
			ProviderReference: &ref, Status: ledger.EvidenceSucceeded, Owner: "ops", Deadline: time.Now().Add(time.Hour),
		}, "acme-corp"); err != nil {
			t.Fatal(err)
		}
	}

	got := f.announcements(t)
	if len(got) != 3 {
		t.Fatalf("%d announcements on %d subjects, want 3: %v", len(got), len(got), got)
	}
	opSubject := ledger.ReviewSubject(prefix, &f.tenant, string(ledger.ReasonOutcomeUnknown))
	if a, ok := got[opSubject]; !ok || a.OperationID == nil || *a.OperationID != op2.ID || a.Reason != ledger.ReasonOutcomeUnknown ||
		a.Key != "po-2" || a.Tenant != "acme-corp" || a.Version != reviewed.Version || a.Owner != "ops" || a.Deadline == nil {
		t.Errorf("operation's announcement on %s: %+v (found %v)", opSubject, a, ok)
	}
	for _, tenant := range []*uuid.UUID{&f.tenant, nil} {
		subject := ledger.ReviewSubject(prefix, tenant, string(ledger.ReasonUnmatchedEvidence))
		a, ok := got[subject]
		if !ok || a.EvidenceID == nil || a.OperationID != nil || a.Reference != "al_nobody" || a.ProviderReference == nil || *a.ProviderReference != ref {
			t.Errorf("evidence's announcement on %s: %+v (found %v)", subject, a, ok)
		}
	}
}
