package ledger_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/actledger/actledger/internal/testdb"
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

// TestWaitingStatesOfSQLAreThoseOfGo holds the SQL lists of the states
// that wait for a dispatch message (the stuck sweep's walks, a resume's
// batch) to the Go rule that gives a change its message (waitsIn), state
// by state, as Postgres reads the lists: a state the SQL lacked would
// leave its lost messages unswept, one it had too many would send what
// waits for nothing. The sweep walks the states due at once by
// updated_at and the others by next_attempt_at; a message is due at once
// (no deliver_after) in exactly the first (DispatchDue).
func TestWaitingStatesOfSQLAreThoseOfGo(t *testing.T) {
	t.Parallel()
	pool := testdb.New(t)
	in := func(list string, s ledger.Status) bool {
		t.Helper()
		var got bool
		if err := pool.QueryRow(context.Background(), `SELECT $1::text IN (`+list+`)`, string(s)).Scan(&got); err != nil {
			t.Fatalf("%s IN (%s): %v", s, list, err)
		}
		return got
	}
	next := time.Unix(1700000000, 0)
	for _, s := range ledger.Statuses {
		now, scheduled := in(ledger.WaitsNowSQL, s), in(ledger.WaitsScheduledSQL, s)
		if got, want := now, ledger.WaitsIn(s, false); got != want {
			t.Errorf("%s: in waitsNowSQL %v, waits unscheduled %v", s, got, want)
		}
		if got, want := now || scheduled, ledger.WaitsIn(s, true); got != want || s.AwaitsDispatch() != want {
			t.Errorf("%s: in waitsNowSQL or waitsScheduledSQL %v, waits scheduled %v, awaits dispatch %v", s, got, want, s.AwaitsDispatch())
		}
		if now && scheduled {
			t.Errorf("%s is in both lists", s)
		}
		due := ledger.DispatchDue(s, &next)
		switch {
		case now && !due.IsZero():
			t.Errorf("%s: walked as due at once, but its message is due at %v", s, due)
		case scheduled && !due.Equal(next):
			t.Errorf("%s: walked by next_attempt_at, but its message is due at %v, not %v", s, due, next)
		}
	}
}
