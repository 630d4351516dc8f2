package api_test

import (
	"bytes"
	"fmt"
	"net/http"
	"sync"
	"testing"

	"github.com/actledger/actledger/internal/testpipeline"
)

// TestSixtyKeyConflictsLeaveOneEventAndACount: a caller that reuses a key
// with other params 60 times (some at once) gets 60 answers 409, and the
// operation's history holds one key_conflict event, whose detail counts
// all 60; before, each 409 appended an event, and the history grew
// without bound.
func TestSixtyKeyConflictsLeaveOneEventAndACount(t *testing.T) {
	t.Parallel()
	p := testpipeline.New(t, testpipeline.Options{})
	_, out := p.Propose("po-60", `{"sku":"A-1","qty":3}`)
	op := p.Operation(out)

	const conflicts = 60
	statuses := make(chan int, conflicts)
	var wg sync.WaitGroup
	for i := range conflicts {
		wg.Add(1)
		go func() {
			defer wg.Done()
			body := fmt.Sprintf(`{"action":%q,"key":"po-60","params":{"sku":"A-1","qty":%d},"request_approval":true}`, testpipeline.Action, 100+i)
			req, _ := http.NewRequest(http.MethodPost, p.API.URL+"/v1/operations", bytes.NewBufferString(body))
			req.Header.Set("Authorization", "Bearer "+p.Agent)
			res, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Error(err)
				return
			}
			res.Body.Close()
			statuses <- res.StatusCode
		}()
		if i%3 == 2 {
			wg.Wait() // some alone, some three at once
		}
	}
	wg.Wait()
	close(statuses)
	n := 0
	for s := range statuses {
		if s != http.StatusConflict {
			t.Errorf("a conflicting request answered %d, want 409", s)
		}
		n++
	}
	if n != conflicts {
		t.Fatalf("%d answers, want %d", n, conflicts)
	}

	status, page := p.Do("GET", "/v1/operations/"+op.ID.String()+"/events", p.Agent, "")
	if status != http.StatusOK {
		t.Fatalf("events: %d %v", status, page)
	}
	var found []map[string]any
	events, _ := page["events"].([]any)
	for _, e := range events {
		if ev := e.(map[string]any); ev["kind"] == "key_conflict" {
			found = append(found, ev)
		}
	}
	if len(events) != 2 || len(found) != 1 {
		t.Fatalf("history of %d events with %d key_conflict, want 2 events (created, one key_conflict): %v", len(events), len(found), events)
	}
	detail, _ := found[0]["detail"].(map[string]any)
	if got, _ := detail["conflicts"].(float64); got != conflicts {
		t.Errorf("key_conflict detail = %v, want conflicts %d", detail, conflicts)
	}
	if at, _ := detail["last_conflict_at"].(string); len(at) == 0 || at[len(at)-1] != 'Z' {
		t.Errorf("last_conflict_at = %q, want an RFC 3339 UTC time", detail["last_conflict_at"])
	}
	if fp, _ := detail["params_fingerprint"].(string); fp == "" {
		t.Errorf("the event lost the first conflict's detail: %v", detail)
	}
}
