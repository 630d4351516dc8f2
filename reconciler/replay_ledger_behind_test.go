package reconciler_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/google/uuid"
	"github.com/nats-io/nats.go"

	"github.com/actledger/actledger/internal/testfactory"
	"github.com/actledger/actledger/internal/testpipeline"
	"github.com/actledger/actledger/ledger"
	"github.com/actledger/actledger/reconciler"
)

// announce publishes a review announcement of operation id under key on
// the tenant's review subject, as the relay does.
func announce(t *testing.T, p *testpipeline.Pipeline, id uuid.UUID, key string) {
	t.Helper()
	payload, err := json.Marshal(ledger.ReviewAnnouncement{OperationID: &id, Tenant: p.Tenant, Action: testpipeline.Action,
		Key: key, Reason: ledger.ReasonLookupFailing, Provider: "acme", Owner: "supply-ops"})
	if err != nil {
		t.Fatal(err)
	}
	msg := &nats.Msg{Subject: ledger.ReviewSubject(p.Broker.ReviewSubjectPrefix(), &p.TenantID, string(ledger.ReasonLookupFailing)),
		Data: payload, Header: nats.Header{}}
	msg.Header.Set(nats.MsgIdHdr, "review."+id.String())
	if _, err := p.Broker.JetStream().PublishMsg(context.Background(), msg); err != nil {
		t.Fatal(err)
	}
}

// TestReplayOfAReviewItemTheLedgerLostPausesDispatch: a review
// announcement naming an operation no tenant's ledger holds, made after
// the last prune, proves that committed work was lost; replay says so
// (ledger_behind) and pauses dispatch for every tenant, a dry run pauses
// nothing, and an announcement of another tenant's operation on this
// tenant's subject is skipped as before, with nothing paused.
func TestReplayOfAReviewItemTheLedgerLostPausesDispatch(t *testing.T) {
	t.Parallel()
	p := testpipeline.New(t, testpipeline.Options{LookupLag: -1})
	globex := testfactory.NewTenant(t, p.Tokens, "Globex")
	theirs := testfactory.Operation(t, p.Store, testfactory.OperationOpts{Tenant: globex, Key: "po-theirs"})
	announce(t, p, theirs.ID, "po-theirs")
	lost := uuid.Must(uuid.NewV7())
	announce(t, p, lost, "po-lost")

	dry := replay(t, p, `{"dry_run":true}`)
	if dry.results["po-lost"] != reconciler.ReplayLedgerBehind {
		t.Errorf("dry run: po-lost is %q, want ledger_behind", dry.results["po-lost"])
	}
	if _, seen := dry.results["po-theirs"]; seen {
		t.Errorf("dry run reported another tenant's operation: %+v", dry)
	}
	if pauses := p.LedgerBehindPauses(p.TenantID); len(pauses) != 0 {
		t.Fatalf("a dry run paused dispatch: %+v", pauses)
	}
	done := replay(t, p, `{}`)
	if done.results["po-lost"] != reconciler.ReplayLedgerBehind {
		t.Errorf("replay: po-lost is %q, want ledger_behind", done.results["po-lost"])
	}
	if _, seen := done.results["po-theirs"]; seen {
		t.Errorf("replay reported another tenant's operation: %+v", done)
	}
	pauses := p.LedgerBehindPauses(p.TenantID)
	if len(pauses) != 1 || pauses[0].Detail != (ledger.Behind{Kind: "review", OperationID: lost}).String() {
		t.Fatalf("pauses after replay %+v, want one ledger_behind naming %s", pauses, lost)
	}
}
