package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/actledger/actledger/internal/testpoll"
	"github.com/actledger/actledger/internal/testreceiver"
)

// withReceiver adds a receiver of the demo tenant's approval requests to
// the providers file.
func withReceiver(url string) func(string) string {
	return func(cfg string) string {
		return cfg + fmt.Sprintf("notifications:\n  approvals-relay:\n    url: %s\n    secret_env: NOTIFY_SECRET\n    tenant: demo\n    events: [approval.requested]\n", url)
	}
}

// TestKilledProcessBetweenCommitAndDeliveryLosesNoNotification: serve is
// killed with SIGKILL after a proposal's commit, while its
// approval.requested is on its way to the receiver (the receiver holds
// the first request open, so the delivery cannot have completed); the
// next serve delivers it. The receiver gets the event under one
// webhook-id, signed, exactly one event after dropping repeats.
func TestKilledProcessBetweenCommitAndDeliveryLosesNoNotification(t *testing.T) {
	t.Parallel()
	secret := testreceiver.Secret(t)
	first := make(chan struct{})
	var once sync.Once
	rc := testreceiver.New(t, func(n int, w http.ResponseWriter, r *http.Request) {
		if n == 1 {
			once.Do(func() { close(first) })
			<-r.Context().Done() // never answers: the process dies first
			return
		}
		w.WriteHeader(http.StatusOK)
	})
	in := prepareServe(t, withReceiver(rc.URL))
	vars := []string{"NOTIFY_SECRET=" + secret, "NOTIFY_TIMEOUT=3s"}
	first1 := startServeProcess(t, in, "", vars...)
	cmd, exited, log := first1.cmd, first1.done, first1.out

	agent := in.token(t, "agent")
	op := post(t, in.base+"/v1/operations", agent, `{"action":"supplier.create_order","key":"po-crash","params":{"sku":"A-1","qty":50},"request_approval":true}`)
	if op["status"] != "awaiting_approval" {
		t.Fatalf("proposal: %v", op)
	}
	select {
	case <-first:
	case <-time.After(20 * time.Second):
		t.Fatalf("the receiver heard nothing; serve's log:\n%s", log.String())
	}
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	<-exited
	// Every request after the first is answered 200: a delivery.
	delivered := func() bool { return len(rc.Deliveries()) > 1 }
	if delivered() {
		t.Fatal("delivered before the restart")
	}

	log2 := startServeProcess(t, in, "", vars...).out
	testpoll.Until(t, 30*time.Second, func() error {
		if !delivered() {
			return fmt.Errorf("the event was not delivered after the restart; receiver got %d requests; serve's log:\n%s", len(rc.Deliveries()), log2.String())
		}
		return nil
	})
	got := rc.Deliveries()
	ids := map[string]bool{}
	for _, n := range got {
		ids[n.ID] = true
		testreceiver.Verify(t, secret, n)
		var body struct {
			Type string         `json:"type"`
			Data map[string]any `json:"data"`
		}
		if err := json.Unmarshal(n.Body, &body); err != nil {
			t.Fatal(err)
		}
		if body.Type != "approval.requested" || body.Data["operation_id"] != op["id"] {
			t.Errorf("receiver got %s, want approval.requested of %v", n.Body, op["id"])
		}
	}
	if len(ids) != 1 {
		t.Errorf("receiver got %d webhook-ids over %d requests, want one event", len(ids), len(got))
	}
	t.Logf("delivered after the restart: %d requests, webhook-id %s\nwebhook-timestamp: %s\nwebhook-signature: %s\n%s",
		len(got), got[len(got)-1].ID, got[len(got)-1].Timestamp, got[len(got)-1].Signature, got[len(got)-1].Body)
}

// extendEnv is getenv with the variables of extra set.
func extendEnv(getenv func(string) string, extra map[string]string) func(string) string {
	return func(k string) string {
		if v, ok := extra[k]; ok {
			return v
		}
		return getenv(k)
	}
}

// TestNotificationsTestPrintsTheReceiversAnswer: `actledger notifications
// test RECEIVER` sends one signed test event, which the receiver verifies
// with its own HMAC check, and prints the receiver's status and body; a
// receiver that refuses it makes the command fail with its answer shown;
// an unknown receiver is named.
func TestNotificationsTestPrintsTheReceiversAnswer(t *testing.T) {
	t.Parallel()
	secret := testreceiver.Secret(t)
	status, body := http.StatusAccepted, `{"relayed_to":"#approvals"}`
	rc := testreceiver.New(t, func(_ int, w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(status)
		fmt.Fprint(w, body)
	})
	in := prepareServe(t, withReceiver(rc.URL))
	getenv := extendEnv(in.getenv, map[string]string{"NOTIFY_SECRET": secret, "CONSOLE_URL": "https://actledger.acme.example/console"})

	var out bytes.Buffer
	if err := run(t.Context(), []string{"notifications", "test", "approvals-relay"}, getenv, &out, io.Discard); err != nil {
		t.Fatalf("notifications test: %v", err)
	}
	if !strings.Contains(out.String(), "answered 202 Accepted") || !strings.Contains(out.String(), `{"relayed_to":"#approvals"}`) {
		t.Errorf("output %q, want the receiver's status and body", out.String())
	}
	got := rc.Deliveries()
	if len(got) != 1 {
		t.Fatalf("receiver got %d requests, want 1", len(got))
	}
	testreceiver.Verify(t, secret, got[0])
	if !strings.Contains(string(got[0].Body), `"type":"notification.test"`) || !strings.Contains(string(got[0].Body), "https://actledger.acme.example/console/") {
		t.Errorf("test event %s, want type notification.test linking the console", got[0].Body)
	}

	status = http.StatusUnauthorized
	out.Reset()
	err := run(t.Context(), []string{"notifications", "test", "approvals-relay"}, getenv, &out, io.Discard)
	if err == nil || !strings.Contains(out.String(), "answered 401") {
		t.Errorf("a refusing receiver: err %v, output %q; want an error and the 401 shown", err, out.String())
	}
	// A receiver's answer reaches the terminal escaped: it cannot clear the
	// screen or forge a line of the command's own.
	status, body = http.StatusOK, "ok\x1b[2J\rreceiver approvals-relay answered 200 OK"
	out.Reset()
	if err := run(t.Context(), []string{"notifications", "test", "approvals-relay"}, getenv, &out, io.Discard); err != nil {
		t.Fatalf("notifications test: %v", err)
	}
	if strings.ContainsAny(out.String(), "\x1b\r") || !strings.Contains(out.String(), `ok\u001b[2J\u000dreceiver`) {
		t.Errorf("output %q, want the receiver's control characters escaped", out.String())
	}
	if err := run(t.Context(), []string{"notifications", "test", "slack"}, getenv, io.Discard, io.Discard); err == nil || !strings.Contains(err.Error(), `"slack"`) {
		t.Errorf("unknown receiver: %v, want an error naming it", err)
	}
}

// TestNotificationsTestPostsASlackMessageWithoutShowingItsURL: for a
// format: slack receiver, `actledger notifications test` posts one Slack
// message (a JSON object whose text says it is a test and links the
// console) to the URL its url_env holds, and prints the answer naming the
// URL by its host only: the whole URL is the secret.
func TestNotificationsTestPostsASlackMessageWithoutShowingItsURL(t *testing.T) {
	t.Parallel()
	var got []map[string]any
	var mu sync.Mutex
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var payload map[string]any
		if r.Header.Get("Content-Type") != "application/json" || json.NewDecoder(r.Body).Decode(&payload) != nil {
			http.Error(w, "invalid_payload", http.StatusBadRequest)
			return
		}
		mu.Lock()
		got = append(got, payload)
		mu.Unlock()
		fmt.Fprint(w, "ok")
	}))
	t.Cleanup(srv.Close)
	in := prepareServe(t, func(cfg string) string {
		return cfg + "notifications:\n  approvers-channel:\n    format: slack\n    url_env: SLACK_URL\n    tenant: demo\n    events: [approval.requested]\n"
	})
	secretURL := srv.URL + "/services/T000/B000/s3cr3t-path"
	getenv := extendEnv(in.getenv, map[string]string{"SLACK_URL": secretURL, "CONSOLE_URL": "https://actledger.acme.example/console"})
	var out bytes.Buffer
	if err := run(t.Context(), []string{"notifications", "test", "approvers-channel"}, getenv, &out, io.Discard); err != nil {
		t.Fatalf("notifications test: %v", err)
	}
	if !strings.Contains(out.String(), "answered 200 OK") || strings.Contains(out.String(), "s3cr3t-path") {
		t.Errorf("output %q, want the answer, and the URL shown by its host only", out.String())
	}
	mu.Lock()
	defer mu.Unlock()
	if len(got) != 1 {
		t.Fatalf("Slack got %d messages, want 1", len(got))
	}
	text, _ := got[0]["text"].(string)
	if len(got[0]) != 1 || !strings.Contains(text, "*Test notification*") || !strings.Contains(text, "<https://actledger.acme.example/console/|") {
		t.Errorf("message %v, want only a text saying it is a test and linking the console", got[0])
	}
}
