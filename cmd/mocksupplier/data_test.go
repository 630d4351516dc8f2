package main

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"
)

// startRun runs the command with args until the returned stop is called, and returns the base
// URL it listens on (read from its start-up log line). stop reports what run returned.
func startRun(t *testing.T, args ...string) (baseURL string, stop func() error) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	logs := &addrWriter{found: make(chan string, 1)}
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, append([]string{"--addr", "127.0.0.1:0"}, args...), func(string) string { return "" }, logs)
	}()
	var stopped sync.Once
	var runErr error
	stop = func() error {
		stopped.Do(func() {
			cancel()
			select {
			case runErr = <-done:
			case <-time.After(15 * time.Second):
				t.Fatal("run did not return after its context ended")
			}
		})
		return runErr
	}
	t.Cleanup(func() { _ = stop() })
	select {
	case addr := <-logs.found:
		return "http://" + addr, stop
	case err := <-done:
		t.Fatalf("run returned before listening: %v\n%s", err, logs.text())
	case <-time.After(15 * time.Second):
		t.Fatalf("run logged no listening address:\n%s", logs.text())
	}
	return "", nil
}

// addrWriter collects the command's log and reports the address of its "listening" line.
type addrWriter struct {
	mu    sync.Mutex
	buf   strings.Builder
	found chan string
}

var listeningAddr = regexp.MustCompile(`msg="mock supplier listening" addr=(\S+)`)

func (w *addrWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf.Write(p)
	if m := listeningAddr.FindSubmatch(p); m != nil {
		select {
		case w.found <- string(m[1]):
		default:
		}
	}
	return len(p), nil
}

func (w *addrWriter) text() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.buf.String()
}

// call sends one request on a fresh connection and returns the status, the replay header and
// the body, or the transport error.
func call(method, url, key, body string) (status int, replayed bool, respBody []byte, err error) {
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		return 0, false, nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	if key != "" {
		req.Header.Set("Idempotency-Key", key)
	}
	client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}, Timeout: 10 * time.Second}
	resp, err := client.Do(req)
	if err != nil {
		return 0, false, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header.Get("Idempotent-Replayed") == "true", b, err
}

// adminOrders is the part of GET /admin/orders the test reads.
type adminOrders struct {
	Total       int            `json:"total"`
	ByReference map[string]int `json:"by_reference"`
}

func countOrders(t *testing.T, baseURL string) adminOrders {
	t.Helper()
	status, _, body, err := call(http.MethodGet, baseURL+"/admin/orders", "", "")
	if err != nil || status != http.StatusOK {
		t.Fatalf("GET /admin/orders: %v, status %d, body %s", err, status, body)
	}
	var v adminOrders
	if err := json.Unmarshal(body, &v); err != nil {
		t.Fatalf("decoding /admin/orders %s: %v", body, err)
	}
	return v
}

func TestRunWithDataKeepsOrdersAcrossARestart(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "orders.jsonl")

	url, stop := startRun(t, "--data", path)
	if status, _, body, err := call(http.MethodPost, url+"/v1/orders", "key-1", `{"client_reference":"po-1"}`); err != nil || status != http.StatusCreated {
		t.Fatalf("create po-1: %v, status %d, body %s", err, status, body)
	}
	if status, _, body, err := call(http.MethodPost, url+"/admin/faults", "", `{"reference":"po-2","faults":[{"kind":"drop_after_commit"}]}`); err != nil || status != http.StatusOK {
		t.Fatalf("POST /admin/faults: %v, status %d, body %s", err, status, body)
	}
	if _, _, _, err := call(http.MethodPost, url+"/v1/orders", "key-2", `{"client_reference":"po-2"}`); err == nil {
		t.Fatal("the drop_after_commit request got an answer")
	}
	if err := stop(); err != nil {
		t.Fatalf("first run: %v", err)
	}

	url, _ = startRun(t, "--data", path)
	got := countOrders(t, url)
	if got.Total != 2 || got.ByReference["po-1"] != 1 || got.ByReference["po-2"] != 1 {
		t.Errorf("after the restart /admin/orders = %+v, want one order each for po-1 and po-2", got)
	}
	status, replayed, body, err := call(http.MethodPost, url+"/v1/orders", "key-2", `{"client_reference":"po-2"}`)
	if err != nil || status != http.StatusCreated || !replayed {
		t.Errorf("repeat of the dropped key after the restart: %v, status %d, replayed %v, body %s; want the stored 201", err, status, replayed, body)
	}
	if got := countOrders(t, url); got.Total != 2 {
		t.Errorf("after the repeat /admin/orders total = %d, want 2 (no new order)", got.Total)
	}
}

func TestRunWithoutDataForgetsOrdersAtExit(t *testing.T) {
	t.Parallel()
	url, stop := startRun(t)
	if status, _, body, err := call(http.MethodPost, url+"/v1/orders", "key-1", `{"client_reference":"po-1"}`); err != nil || status != http.StatusCreated {
		t.Fatalf("create po-1: %v, status %d, body %s", err, status, body)
	}
	if err := stop(); err != nil {
		t.Fatalf("first run: %v", err)
	}
	url, _ = startRun(t)
	if got := countOrders(t, url); got.Total != 0 {
		t.Errorf("a run without --data found %d orders, want 0", got.Total)
	}
}

func TestRunRefusesACorruptDataFile(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "orders.jsonl")
	if err := os.WriteFile(path, []byte("not json\n"), 0o644); err != nil {
		t.Fatal(err)
	}

	ctx, cancel := context.WithCancel(context.Background())
	cancel() // were the file accepted, run would return at once rather than serve
	err := run(ctx, []string{"--addr", "127.0.0.1:0", "--data", path}, func(string) string { return "" }, io.Discard)

	if err == nil || !strings.Contains(err.Error(), path) {
		t.Errorf("run = %v, want an error naming %s", err, path)
	}
}
