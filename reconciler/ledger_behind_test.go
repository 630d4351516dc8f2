package reconciler_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/actledger/actledger/internal/mocksupplier"
	"github.com/actledger/actledger/internal/testpipeline"
	"github.com/actledger/actledger/ledger"
)

// TestEvidenceMessageForAWebhookEventTheLedgerNeverMadePausesDispatch: an
// evidence message naming a webhook event whose id the ledger's sequence
// never reached proves the ledger lost the row (a failover, a restore):
// dispatch pauses for the tenant with reason ledger_behind. One naming a
// row the ledger made and deleted since (as retention prunes an applied
// event) does not pause.
func TestEvidenceMessageForAWebhookEventTheLedgerNeverMadePausesDispatch(t *testing.T) {
	t.Parallel()
	p := testpipeline.New(t, testpipeline.Options{LookupLag: -1, Mode: mocksupplier.Ignore})
	p.Start(1)
	ctx := context.Background()
	var pruned int64
	if err := p.Pool.QueryRow(ctx, `INSERT INTO webhook_events (provider, event_id, type, reference, provider_reference, status, payload)
VALUES ('acme', 'evt_old', 'order.created', 'al_x', 'ord_x', 'succeeded', '{}') RETURNING id`).Scan(&pruned); err != nil {
		t.Fatal(err)
	}
	if _, err := p.Pool.Exec(ctx, `DELETE FROM webhook_events WHERE id = $1`, pruned); err != nil {
		t.Fatal(err)
	}
	behind := func() int {
		pauses, err := p.Store.Pauses(ctx, p.TenantID)
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for _, pz := range pauses {
			if pz.Reason == ledger.PauseLedgerBehind {
				n++
			}
		}
		return n
	}
	for _, tc := range []struct {
		name string
		id   int64
		want int
	}{
		{"a pruned row", pruned, 0},
		{"a row beyond the sequence", pruned + 1000, 1},
	} {
		ack, err := p.Broker.JetStream().Publish(ctx, p.Broker.EvidenceSubject("acme"), fmt.Appendf(nil, `{"kind":"webhook","webhook_event_id":%d}`, tc.id))
		if err != nil {
			t.Fatal(err)
		}
		handled(t, p, ack.Sequence)
		if got := behind(); got != tc.want {
			t.Errorf("after a message naming %s: %d ledger_behind pauses, want %d", tc.name, got, tc.want)
		}
	}
}
