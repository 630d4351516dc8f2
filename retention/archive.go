package retention

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"github.com/actledger/actledger/ledger"
	"github.com/actledger/actledger/view"
)

// Stdout is the Archive value that writes the archive to the process's
// standard output (Config.Stdout) instead of a directory.
const Stdout = "-"

// archive is one run's archive: a new file in the directory, created at
// the run's first batch, or the standard output.
type archive struct {
	dir  string
	name string // the file's name, once created
	out  io.Writer
	file *os.File
	// size is the length of the file after the last synced batch: a
	// batch whose write failed is cut back to it, so the file holds whole
	// lines only.
	size int64
}

// fileName names a run's archive by its cutoff and its start, so that
// files sort by time and a rerun never overwrites a file.
func fileName(cutoff, start time.Time) string {
	const stamp, precise = "20060102T150405Z", "20060102T150405.000000000Z"
	return fmt.Sprintf("actledger-archive-before-%s-at-%s.jsonl", cutoff.UTC().Format(stamp), start.UTC().Format(precise))
}

// write appends one JSON line per history and makes them durable before
// it returns: the file is fsynced (and, when it was just created, its
// directory too, so its name survives a crash). Standard output is synced
// when it is a file; a pipe's durability is its reader's.
func (a *archive) write(_ context.Context, histories []ledger.History, name string) error {
	if a.dir != "" && a.file == nil {
		f, err := os.OpenFile(filepath.Join(a.dir, name), os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o640)
		if err != nil {
			return fmt.Errorf("create archive: %w", err)
		}
		if err := syncDir(a.dir); err != nil {
			_ = f.Close()
			_ = os.Remove(filepath.Join(a.dir, name))
			return err
		}
		a.file, a.out, a.name = f, f, filepath.Join(a.dir, name)
	}
	var buf []byte
	for _, h := range histories {
		line, err := json.Marshal(view.OfHistory(h.Operation, h.Events))
		if err != nil {
			return fmt.Errorf("encode operation %s: %w", h.Operation.ID, err)
		}
		buf = append(append(buf, line...), '\n')
	}
	if _, err := a.out.Write(buf); err != nil {
		a.cutBack()
		return fmt.Errorf("write archive: %w", err)
	}
	if err := a.sync(); err != nil {
		a.cutBack()
		return err
	}
	a.size += int64(len(buf))
	return nil
}

// sync makes what was written durable.
func (a *archive) sync() error {
	f := a.file
	if f == nil {
		f, _ = a.out.(*os.File)
	}
	if f == nil {
		return nil
	}
	err := f.Sync()
	// A terminal or a pipe cannot be synced; only a file can.
	if a.file == nil && (errors.Is(err, syscall.EINVAL) || errors.Is(err, syscall.ENOTSUP)) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("sync archive: %w", err)
	}
	return nil
}

// cutBack cuts the file back to its last synced length after a failed
// batch, so it never ends in half a line of a batch that was not deleted.
func (a *archive) cutBack() {
	if a.file != nil {
		_ = a.file.Truncate(a.size)
		_, _ = a.file.Seek(a.size, io.SeekStart)
	}
}

// close closes the file, removing it when no batch was written to it.
func (a *archive) close() error {
	if a.file == nil {
		return nil
	}
	err := a.file.Close()
	if a.size == 0 {
		_ = os.Remove(a.name)
		a.name = ""
	}
	return err
}

// syncDir fsyncs directory dir, making a file just created in it durable.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("open archive directory: %w", err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("sync archive directory: %w", err)
	}
	return nil
}
