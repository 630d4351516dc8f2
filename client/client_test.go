package client_test

import (
	"context"
	"errors"
	"net/http"
	"testing"
	"time"

	"github.com/actledger/actledger/client"
	"github.com/actledger/actledger/internal/testpipeline"
)

// TestWaitOperationLongPollsByETag: WaitOperation sends ?wait= with
// If-None-Match; an unchanged operation answers changed=false (304) when
// the wait runs out, and a change wakes it with the new view and ETag.
func TestWaitOperationLongPollsByETag(t *testing.T) {
	t.Parallel()
	p := testpipeline.New(t, testpipeline.Options{})
	p.Start(1) // the ledger's watcher wakes long polls
	ctx := context.Background()
	agent := client.New(p.API.URL, p.Agent, client.Options{})
	op, err := agent.Propose(ctx, testpipeline.Action, "po-wait", []byte(`{"sku":"A-1","qty":1}`), "restock")
	if err != nil {
		t.Fatal(err)
	}
	if op.ETag == "" || op.Status != client.StatusAwaitingApproval {
		t.Fatalf("proposal = %s with ETag %q, want awaiting_approval with an ETag", op.Status, op.ETag)
	}
	same, changed, err := agent.WaitOperation(ctx, op.ID, op.ETag, time.Second)
	if err != nil || changed || same != nil {
		t.Fatalf("wait on an unchanged operation = %v, %v, %v; want a 304 (changed false)", same, changed, err)
	}

	woke := make(chan error, 1)
	var next *client.Operation
	go func() {
		var changed bool
		var err error
		next, changed, err = agent.WaitOperation(ctx, op.ID, op.ETag, 50*time.Second)
		if err == nil && !changed {
			err = errors.New("the wait ran out without the change")
		}
		woke <- err
	}()
	approver := client.New(p.API.URL, p.Approver, client.Options{})
	if _, err := approver.Approve(ctx, op.ID, client.ApproveRequest{ParamsFingerprint: op.ParamsFingerprint}); err != nil {
		t.Fatal(err)
	}
	if err := <-woke; err != nil {
		t.Fatal(err)
	}
	// The first change it sees is the approval or a later step.
	if next.Status == client.StatusAwaitingApproval || next.ApprovalID == nil || next.ETag == op.ETag {
		t.Fatalf("after approval the wait answered %s (approval %v) with ETag %s, want the approved operation with a new ETag", next.Status, next.ApprovalID, next.ETag)
	}
}

// TestRefusalsAreTypedErrors: the API's refusals come back as *Error with
// the status and the API's code.
func TestRefusalsAreTypedErrors(t *testing.T) {
	t.Parallel()
	p := testpipeline.New(t, testpipeline.Options{})
	ctx := context.Background()
	for _, tc := range []struct {
		name   string
		call   func() error
		status int
		code   string
	}{
		{"no token", func() error {
			_, err := client.New(p.API.URL, "", client.Options{}).ListActions(ctx)
			return err
		}, http.StatusUnauthorized, "unauthenticated"},
		{"agent approves", func() error {
			_, err := client.New(p.API.URL, p.Agent, client.Options{}).Approve(ctx, "01a22bf8-2f9a-7973-b278-6a8a5d6ba11a", client.ApproveRequest{ParamsFingerprint: "x"})
			return err
		}, http.StatusForbidden, "forbidden"},
		{"unknown id", func() error {
			_, err := client.New(p.API.URL, p.Agent, client.Options{}).GetOperation(ctx, "01a22bf8-2f9a-7973-b278-6a8a5d6ba11a")
			return err
		}, http.StatusNotFound, "not_found"},
		{"no approval", func() error {
			_, err := client.New(p.API.URL, p.Agent, client.Options{}).CreateOperation(ctx, client.CreateOperationRequest{
				Action: testpipeline.Action, Key: "po-1", Params: []byte(`{"sku":"A-1"}`)})
			return err
		}, http.StatusForbidden, "approval_mismatch"},
	} {
		err := tc.call()
		var e *client.Error
		if !errors.As(err, &e) || e.Status != tc.status || e.Code != tc.code || e.Message == "" {
			t.Errorf("%s: %v, want *client.Error %d %s with a message", tc.name, err, tc.status, tc.code)
		}
	}
}

// TestWaitOperationLongerThanTheAPIServesIsCappedNotRefused: the API
// waits at most 60 s (a longer ?wait= is a 400); WaitOperation asks for at
// most that, so a longer wait is a shorter one, never an error.
func TestWaitOperationLongerThanTheAPIServesIsCappedNotRefused(t *testing.T) {
	t.Parallel()
	p := testpipeline.New(t, testpipeline.Options{})
	ctx := context.Background()
	agent := client.New(p.API.URL, p.Agent, client.Options{})
	op, err := agent.Propose(ctx, testpipeline.Action, "po-long-wait", []byte(`{"sku":"A-1","qty":1}`), "restock")
	if err != nil {
		t.Fatal(err)
	}
	for _, wait := range []time.Duration{60*time.Second + 500*time.Millisecond, 90 * time.Second, time.Hour} {
		// A stale ETag: the API answers at once, whatever the wait.
		got, changed, err := agent.WaitOperation(ctx, op.ID, `"0"`, wait)
		if err != nil || !changed || got == nil || got.ID != op.ID {
			t.Errorf("wait %s: %v, %v, %v; want the operation at once", wait, got, changed, err)
		}
	}
}
