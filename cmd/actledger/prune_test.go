package main

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/actledger/actledger/internal/testfactory"
	"github.com/actledger/actledger/internal/testpoll"
)

// settledAndOld creates an operation through the API, waits until it has
// succeeded at the supplier, and moves it 100 days into the past: past a
// retention of 90 days.
func (in *instance) settledAndOld(t *testing.T, approver, agent, key string) string {
	t.Helper()
	approval := post(t, in.base+"/v1/approvals", approver, `{"action":"supplier.create_order","params":{"sku":"A-1"},"ttl_seconds":600,"policy_version":"p1"}`)
	op := post(t, in.base+"/v1/operations", agent, fmt.Sprintf(`{"action":"supplier.create_order","key":%q,"params":{"sku":"A-1"},"approval_id":%q}`, key, approval["id"]))
	id := op["id"].(string)
	in.waitStatus(t, agent, id, "succeeded")
	pool, err := pgxpool.New(t.Context(), in.getenv("DATABASE_URL"))
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	testfactory.Backdate(t, pool, 100*24*time.Hour, uuid.MustParse(id))
	return id
}

// archiveLines reads the lines of every archive file in dir.
func archiveLines(t *testing.T, dir string) []string {
	t.Helper()
	files, _ := filepath.Glob(filepath.Join(dir, "*.jsonl"))
	var lines []string
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for line := range strings.Lines(string(b)) {
			lines = append(lines, line)
		}
	}
	return lines
}

// statusOf is GET /v1/operations/{id}'s HTTP status.
func (in *instance) statusOf(t *testing.T, token, id string) int {
	t.Helper()
	req, _ := http.NewRequest("GET", in.base+"/v1/operations/"+id, nil)
	req.Header.Set("Authorization", "Bearer "+token)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	_ = res.Body.Close()
	return res.StatusCode
}

// TestPruneCommandCountsThenArchivesAndDeletes: `actledger prune
// --dry-run` says what would go and leaves the settled old operation
// readable; `actledger prune` archives it (one line naming it) and
// deletes it (404); a second run finds nothing.
func TestPruneCommandCountsThenArchivesAndDeletes(t *testing.T) {
	t.Parallel()
	in := startServe(t)
	approver, agent := in.token(t, "approver"), in.token(t, "agent")
	id := in.settledAndOld(t, approver, agent, "po-old")
	dir := t.TempDir()
	prune := func(args ...string) string {
		t.Helper()
		var out bytes.Buffer
		if err := run(t.Context(), append([]string{"prune", "--older-than", "90d", "--archive", dir}, args...), in.getenv, &out, io.Discard); err != nil {
			t.Fatalf("prune %v: %v", args, err)
		}
		return out.String()
	}
	if out := prune("--dry-run"); !strings.Contains(out, "would prune 1 operations (succeeded 1)") {
		t.Errorf("prune --dry-run:\n%s", out)
	}
	if status := in.statusOf(t, agent, id); status != 200 || len(archiveLines(t, dir)) != 0 {
		t.Fatalf("after a dry run the operation answers %d and the archive holds %d lines", status, len(archiveLines(t, dir)))
	}
	if out := prune(); !strings.Contains(out, "pruned 1 operations (succeeded 1)") || !strings.Contains(out, "archive "+dir) {
		t.Errorf("prune:\n%s", out)
	}
	if status := in.statusOf(t, agent, id); status != 404 {
		t.Errorf("after the prune the operation answers %d, want 404", status)
	}
	if lines := archiveLines(t, dir); len(lines) != 1 || !strings.Contains(lines[0], id) {
		t.Errorf("archive lines %q, want one naming %s", lines, id)
	}
	if out := prune(); !strings.Contains(out, "pruned 0 operations") || !strings.Contains(out, "0 key tombstones") {
		t.Errorf("a second prune:\n%s", out)
	}
	// The key tombstones outlive their prune by the providers file's
	// longest idempotency retention: the file is read, and one that
	// cannot be is an error, not a shorter lifetime.
	missing := filepath.Join(dir, "no-such-providers.yaml")
	if err := run(t.Context(), []string{"prune", "--older-than", "90d", "--archive", dir, "--providers", missing}, in.getenv, io.Discard, io.Discard); err == nil || !strings.Contains(err.Error(), "no-such-providers.yaml") {
		t.Errorf("prune --providers %s: %v, want an error naming the file", missing, err)
	}
}

// TestServePrunesEveryRetentionInterval: with RETENTION_OLDER_THAN,
// RETENTION_ARCHIVE and RETENTION_INTERVAL set, serve archives and
// deletes a settled operation past the retention period on its own, and
// leaves a recent one.
func TestServePrunesEveryRetentionInterval(t *testing.T) {
	t.Parallel()
	in := prepareServe(t, nil)
	dir := t.TempDir()
	base := in.getenv
	in.getenv = func(k string) string {
		switch k {
		case "RETENTION_OLDER_THAN":
			return "90d"
		case "RETENTION_ARCHIVE":
			return dir
		case "RETENTION_INTERVAL":
			return "200ms"
		}
		return base(k)
	}
	startPrepared(t, in)
	approver, agent := in.token(t, "approver"), in.token(t, "agent")
	old := in.settledAndOld(t, approver, agent, "po-old")
	approval := post(t, in.base+"/v1/approvals", approver, `{"action":"supplier.create_order","params":{"sku":"A-2"},"ttl_seconds":600,"policy_version":"p1"}`)
	recent := post(t, in.base+"/v1/operations", agent, fmt.Sprintf(`{"action":"supplier.create_order","key":"po-new","params":{"sku":"A-2"},"approval_id":%q}`, approval["id"]))["id"].(string)
	in.waitStatus(t, agent, recent, "succeeded")
	testpoll.Until(t, 20*time.Second, func() error {
		if status := in.statusOf(t, agent, old); status != http.StatusNotFound {
			return fmt.Errorf("serve did not prune the old operation: it answers %d", status)
		}
		return nil
	})
	if lines := archiveLines(t, dir); len(lines) != 1 || !strings.Contains(lines[0], old) {
		t.Errorf("archive lines %q, want one naming %s", lines, old)
	}
	if status := in.statusOf(t, agent, recent); status != 200 {
		t.Errorf("the recent operation answers %d, want 200", status)
	}
}
