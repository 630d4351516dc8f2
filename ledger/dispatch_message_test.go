package ledger_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/actledger/actledger/internal/testoutbox"
	"github.com/actledger/actledger/ledger"
)

func TestDispatchMessageCarriesTheOperationAndItsVersion(t *testing.T) {
	t.Parallel()
	id := uuid.Must(uuid.NewV7())
	at := time.Unix(1700000000, 5)
	for name, tc := range map[string]struct {
		m         ledger.DispatchMessage
		wantMsgID string
	}{
		"first":     {ledger.DispatchMessage{Subject: "s", OperationID: id, Version: 1}, "dispatch." + id.String() + ".1"},
		"scheduled": {ledger.DispatchMessage{Subject: "s", OperationID: id, Version: 4, DeliverAfter: at}, "dispatch." + id.String() + ".4"},
		"republish": {ledger.DispatchMessage{Subject: "s", OperationID: id, Version: 4, RepublishedAt: at}, "dispatch." + id.String() + ".4.r1700000000000000005"},
	} {
		got := tc.m.Outbox()
		if got.MsgID != tc.wantMsgID || got.Subject != "s" || !got.DeliverAfter.Equal(tc.m.DeliverAfter) {
			t.Errorf("%s: Outbox() = %+v, want msg id %s", name, got, tc.wantMsgID)
		}
		var d ledger.Dispatch
		if err := json.Unmarshal(got.Payload, &d); err != nil || d != (ledger.Dispatch{OperationID: id, Version: tc.m.Version}) {
			t.Errorf("%s: payload %s decodes to %+v, %v", name, got.Payload, d, err)
		}
	}
}

// TestSQLWaitingMessageAgreesWithGoBuilder holds the SQL that recognises
// an operation's waiting dispatch message (resume, stuck sweeper) to the
// Go builder of those messages: every kind of message the builder makes
// for the operation counts as waiting, and another operation's does not.
func TestSQLWaitingMessageAgreesWithGoBuilder(t *testing.T) {
	t.Parallel()
	f := setup(t)
	ctx := context.Background()
	a := f.approve(t, `{"sku":"A-1"}`, 2)
	op, _, err := f.enqueue("po-1", `{"sku":"A-1"}`, a.ID)
	if err != nil {
		t.Fatal(err)
	}
	other, _, err := f.enqueue("po-2", `{"sku":"A-1"}`, a.ID)
	if err != nil {
		t.Fatal(err)
	}
	waits := func() bool {
		t.Helper()
		var w bool
		if err := f.pool.QueryRow(ctx, `SELECT `+ledger.WaitsForMessage+` FROM operations o WHERE o.id = $1`, op.ID).Scan(&w); err != nil {
			t.Fatal(err)
		}
		return w
	}
	publishOwn := func() {
		t.Helper()
		if _, err := f.pool.Exec(ctx, `UPDATE outbox SET published_at = now() WHERE convert_from(payload, 'UTF8')::jsonb->>'operation_id' = $1::text`, op.ID); err != nil {
			t.Fatal(err)
		}
	}
	if waits() {
		t.Fatal("the message Enqueue wrote is not recognised as waiting")
	}
	publishOwn()
	if !waits() {
		t.Fatal("with its message published (and another operation's waiting), the operation does not wait for one")
	}
	for name, m := range map[string]ledger.DispatchMessage{
		"scheduled": {Subject: "TEST.ops.acme", OperationID: op.ID, Version: op.Version, DeliverAfter: time.Now().Add(time.Hour)},
		"republish": {Subject: "TEST.ops.acme", OperationID: op.ID, Version: op.Version, RepublishedAt: time.Now()},
	} {
		if err := testoutbox.InsertErr(ctx, f.pool, m.Outbox()); err != nil {
			t.Fatal(err)
		}
		if waits() {
			t.Errorf("%s: the builder's message is not recognised as waiting", name)
		}
		publishOwn()
	}
	if other.ID == op.ID {
		t.Fatal("one operation for two keys")
	}
}
