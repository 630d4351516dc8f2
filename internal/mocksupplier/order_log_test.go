package mocksupplier_test

import (
	"bytes"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/actledger/actledger/internal/mocksupplier"
	"github.com/actledger/actledger/internal/mocksupplier/internal/faketest"
)

// openAt serves a supplier that keeps its orders in path. stop shuts the listener and closes the
// supplier, as a process that exits would; it is also registered as cleanup and may be called
// twice.
func openAt(t *testing.T, path string) (f fixture, stop func()) {
	t.Helper()
	sup, err := mocksupplier.Open(mocksupplier.Config{DataFile: path})
	if err != nil {
		t.Fatalf("Open(%s): %v", path, err)
	}
	ts := httptest.NewServer(sup)
	var once sync.Once
	stop = func() {
		once.Do(func() {
			ts.Close()
			sup.Close()
		})
	}
	t.Cleanup(stop)
	return fixture{
		sup:    sup,
		url:    ts.URL,
		client: faketest.Client(),
	}, stop
}

func TestDataFileKeepsOrdersAndKeysAcrossRestart(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "orders.jsonl")
	before, stop := openAt(t, path)

	ok := before.create(t, "key-ok", `{"client_reference":"po-ok","qty":1}`)
	before.sup.SetFaults("po-drop", mocksupplier.Fault{Kind: mocksupplier.DropAfterCommit})
	if _, err := before.do(before.client, http.MethodPost, "/v1/orders", "key-drop", `{"client_reference":"po-drop"}`); err == nil {
		t.Fatal("the drop_after_commit request got an answer")
	}
	before.sup.SetFaults("po-500", mocksupplier.Fault{Kind: mocksupplier.Error500AfterCommit})
	failed := before.create(t, "key-500", `{"client_reference":"po-500"}`)
	before.sup.SetFaults("po-422", mocksupplier.Fault{Kind: mocksupplier.Reject422})
	rejected := before.create(t, "key-422", `{"client_reference":"po-422"}`)
	unkeyed := before.create(t, "", `{"client_reference":"po-nokey"}`)
	admin := before.must(t, http.MethodPost, "/admin/orders", "", `{"client_reference":"po-admin"}`)
	if ok.Status != http.StatusCreated || failed.Status != http.StatusInternalServerError ||
		rejected.Status != http.StatusUnprocessableEntity || unkeyed.Status != http.StatusCreated || admin.Status != http.StatusCreated {
		t.Fatalf("before the restart: statuses %d %d %d %d %d, want 201 500 422 201 201",
			ok.Status, failed.Status, rejected.Status, unkeyed.Status, admin.Status)
	}
	dropped := before.lookup(t, "po-drop")
	stop()

	after, _ := openAt(t, path)

	counts := map[string]int{"po-ok": 1, "po-drop": 1, "po-500": 1, "po-422": 0, "po-nokey": 1, "po-admin": 1}
	for ref, want := range counts {
		if got := after.sup.Orders(ref); got != want {
			t.Errorf("after the restart Orders(%s) = %d, want %d", ref, got, want)
		}
	}
	if got := after.sup.TotalOrders(); got != 5 {
		t.Errorf("after the restart TotalOrders = %d, want 5", got)
	}
	if got := after.must(t, http.MethodGet, "/v1/orders/"+ok.order(t).ID, "", ""); !bytes.Equal(got.Body, ok.Body) {
		t.Errorf("GET the order by id after the restart = %s, want %s", got.Body, ok.Body)
	}
	if got := after.lookup(t, "po-drop"); len(got) != 1 || len(dropped) != 1 || got[0].ID != dropped[0].ID {
		t.Errorf("lookup of the dropped order after the restart = %+v, want %+v", got, dropped)
	}

	// Repeats run one after the other: each checks the total the one before it left.
	repeats := []struct {
		name         string
		key, body    string
		wantStatus   int
		wantReplayed bool
		wantBody     []byte // nil: not checked
		wantTotal    int
	}{
		{name: "answered key replays its order", key: "key-ok", body: `{"qty":1,"client_reference":"po-ok"}`,
			wantStatus: http.StatusCreated, wantReplayed: true, wantBody: ok.Body, wantTotal: 5},
		{name: "key whose response was dropped replays the committed order", key: "key-drop", body: `{"client_reference":"po-drop"}`,
			wantStatus: http.StatusCreated, wantReplayed: true, wantTotal: 5},
		{name: "key answered 500 after commit replays the 500", key: "key-500", body: `{"client_reference":"po-500"}`,
			wantStatus: http.StatusInternalServerError, wantReplayed: true, wantBody: failed.Body, wantTotal: 5},
		{name: "key reused with another body is refused", key: "key-ok", body: `{"client_reference":"po-ok","qty":2}`,
			wantStatus: http.StatusBadRequest, wantTotal: 5},
		{name: "key refused before commit was never stored and runs afresh", key: "key-422", body: `{"client_reference":"po-422"}`,
			wantStatus: http.StatusCreated, wantTotal: 6},
	}
	for _, tt := range repeats {
		r := after.create(t, tt.key, tt.body)
		if r.Status != tt.wantStatus || r.replayed() != tt.wantReplayed {
			t.Errorf("%s: status %d replayed %v, want %d replayed %v (body %s)", tt.name, r.Status, r.replayed(), tt.wantStatus, tt.wantReplayed, r.Body)
		}
		if tt.wantBody != nil && !bytes.Equal(r.Body, tt.wantBody) {
			t.Errorf("%s: body %s, want the stored %s", tt.name, r.Body, tt.wantBody)
		}
		if tt.key == "key-drop" && r.Status == http.StatusCreated && r.order(t).ID != dropped[0].ID {
			t.Errorf("%s: replayed order %s, want %s", tt.name, r.order(t).ID, dropped[0].ID)
		}
		if got := after.sup.TotalOrders(); got != tt.wantTotal {
			t.Errorf("%s: TotalOrders = %d, want %d", tt.name, got, tt.wantTotal)
		}
	}
}

func TestConcurrentCreatesWithADataFileAreAllKept(t *testing.T) {
	t.Parallel()
	const n = 40
	path := filepath.Join(t.TempDir(), "orders.jsonl")
	before, stop := openAt(t, path)
	ids := make([]string, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			r, err := before.do(before.client, http.MethodPost, "/v1/orders", fmt.Sprintf("key-%d", i), fmt.Sprintf(`{"client_reference":"po-%d"}`, i))
			if err != nil || r.Status != http.StatusCreated {
				t.Errorf("create %d: %v, status %d", i, err, r.Status)
				return
			}
			ids[i] = r.order(t).ID
		})
	}
	wg.Wait()
	stop()

	after, _ := openAt(t, path)
	if got := after.sup.TotalOrders(); got != n {
		t.Fatalf("after the restart TotalOrders = %d, want %d", got, n)
	}
	for i := range n {
		r := after.create(t, fmt.Sprintf("key-%d", i), fmt.Sprintf(`{"client_reference":"po-%d"}`, i))
		if !r.replayed() || r.order(t).ID != ids[i] {
			t.Errorf("repeat of key-%d: replayed %v, order %s, want a replay of %s", i, r.replayed(), r.order(t).ID, ids[i])
		}
	}
	if got := after.sup.TotalOrders(); got != n {
		t.Errorf("after the repeats TotalOrders = %d, want %d", got, n)
	}
}

func TestResetEmptiesTheDataFile(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "orders.jsonl")
	before, stop := openAt(t, path)
	before.create(t, "key-1", `{"client_reference":"po-1"}`)
	if r := before.must(t, http.MethodPost, "/admin/reset", "", ""); r.Status != http.StatusNoContent {
		t.Fatalf("POST /admin/reset: status %d, body %s", r.Status, r.Body)
	}
	kept := before.create(t, "key-2", `{"client_reference":"po-2"}`).order(t)
	stop()

	after, _ := openAt(t, path)
	if got, want := after.sup.Orders("po-1"), 0; got != want {
		t.Errorf("after reset and restart Orders(po-1) = %d, want %d", got, want)
	}
	if r := after.create(t, "key-1", `{"client_reference":"po-1"}`); r.replayed() {
		t.Error("a key forgotten by the reset was replayed after the restart")
	}
	if r := after.create(t, "key-2", `{"client_reference":"po-2"}`); !r.replayed() || r.order(t).ID != kept.ID {
		t.Errorf("the order made after the reset: replayed %v, want a replay of %s", r.replayed(), kept.ID)
	}
}

func TestDataFileRefusesCreatesAfterClose(t *testing.T) {
	t.Parallel()
	f, stop := openAt(t, filepath.Join(t.TempDir(), "orders.jsonl"))
	f.sup.Close()

	r := f.create(t, "key-1", `{"client_reference":"po-1"}`)

	if r.Status != http.StatusServiceUnavailable || r.errorCode(t) != "storage_unavailable" {
		t.Errorf("create after Close: status %d, body %s, want 503 storage_unavailable", r.Status, r.Body)
	}
	if n := f.sup.Orders("po-1"); n != 0 {
		t.Errorf("Orders(po-1) = %d after a refused create, want 0", n)
	}
	stop()
}

func TestOpenRefusesADataFileItCannotReadInFull(t *testing.T) {
	t.Parallel()
	good := `{"order":{"id":"ord_1","client_reference":"po-1","status":"created","created_at":"2030-01-02T03:04:05Z","params":{"client_reference":"po-1"}}}` + "\n"
	keyed := `{"order":{"id":"ord_2","client_reference":"po-2","status":"created","created_at":"2030-01-02T03:04:05Z","params":{}},` +
		`"idempotency_key":"k","fingerprint":"` + strings.Repeat("ab", 32) + `","status":201,"body":{}}` + "\n"
	tests := []struct {
		name     string
		contents string
		dir      bool // the path is a directory
		wantErr  string
	}{
		{name: "not JSON", contents: good + "garbage\n", wantErr: "line 2"},
		{name: "a write cut short", contents: good + good[:40], wantErr: "line 2 is incomplete"},
		{name: "an order twice", contents: good + good, wantErr: "appears twice"},
		{name: "a key twice", contents: keyed + strings.Replace(keyed, "ord_2", "ord_3", 1), wantErr: "appears twice"},
		{name: "a key without its answer", contents: strings.Replace(keyed, `"status":201,`, "", 1), wantErr: "stored status"},
		{name: "a record without an order", contents: `{"idempotency_key":"k"}` + "\n", wantErr: "no \"order\""},
		{name: "an unknown field", contents: strings.Replace(good, `{"order"`, `{"extra":1,"order"`, 1), wantErr: "line 1"},
		{name: "unreadable", dir: true, wantErr: "data file"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			path := filepath.Join(t.TempDir(), "orders.jsonl")
			if tt.dir {
				if err := os.Mkdir(path, 0o755); err != nil {
					t.Fatal(err)
				}
			} else if err := os.WriteFile(path, []byte(tt.contents), 0o644); err != nil {
				t.Fatal(err)
			}

			sup, err := mocksupplier.Open(mocksupplier.Config{DataFile: path})

			if err == nil {
				sup.Close()
				t.Fatalf("Open accepted %q", tt.contents)
			}
			if !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("Open: %v, want an error naming %s and saying %q", err, path, tt.wantErr)
			}
		})
	}
}

func TestOpenLoadsAGoodDataFile(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "orders.jsonl")
	line := `{"order":{"id":"ord_1","client_reference":"po-1","status":"created","created_at":"2030-01-02T03:04:05Z","params":{"client_reference":"po-1"}}}` + "\n"
	if err := os.WriteFile(path, []byte(line), 0o644); err != nil {
		t.Fatal(err)
	}
	sup, err := mocksupplier.Open(mocksupplier.Config{DataFile: path})
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	defer sup.Close()
	if got := sup.Orders("po-1"); got != 1 {
		t.Errorf("Orders(po-1) = %d, want 1", got)
	}
}

func TestNewPanicsOnADataFileItCannotRead(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "orders.jsonl")
	if err := os.WriteFile(path, []byte("garbage\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	defer func() {
		if msg := fmt.Sprint(recover()); !strings.Contains(msg, path) {
			t.Errorf("New panicked with %q, want a message naming %s", msg, path)
		}
	}()
	mocksupplier.New(mocksupplier.Config{DataFile: path})
}
