package mocksupplier

import (
	"bufio"
	"bytes"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"
)

// orderLog is the data file (Config.DataFile): an append-only log, one JSON object per line,
// each an order that was committed and, when it was created under an Idempotency-Key, the key
// and the answer stored for it.
//
// Why an append-only log rather than a snapshot rewritten through a temporary file and a
// rename: a commit then writes one line and one fsync, whatever the number of orders, where a
// snapshot would rewrite every order on every commit and would have to be taken consistently
// while other requests change the store. Correctness under concurrent requests comes from one
// mutex (mu) that serialises appends: each record is a single write on an O_APPEND file followed
// by fsync, so lines never interleave, and the order is indexed in memory while mu is still held,
// so the file lists orders in the order the server does. mu is taken before Server.mu and only
// by commits, Reset and Close: lookups and the admin API never wait for an fsync.
//
// The order and its idempotency record are one line, written before the order is indexed, its
// webhook scheduled or any answer stored or sent, so a restart can never find an order whose key
// it forgot (a retry would create a second one) nor a key whose order it lost.
type orderLog struct {
	path string

	mu sync.Mutex // serialises appends, truncation and close; taken before Server.mu
	f  *os.File
	// err, once set, makes every later append fail: after a failed write or fsync the file's
	// tail is unknown, and after Close there is no file.
	err error
}

// logRecord is one line of the data file.
type logRecord struct {
	Order *Order `json:"order"`
	// Key is the Idempotency-Key the order was created under; the fields below are set with it.
	Key string `json:"idempotency_key,omitempty"`
	// Fingerprint is the hex SHA-256 of the canonical create body, which a repeat must match.
	Fingerprint string `json:"fingerprint,omitempty"`
	// Status and Body are the answer replayed to a repeat with the same key.
	Status int             `json:"status,omitempty"`
	Body   json.RawMessage `json:"body,omitempty"`
}

var errLogClosed = errors.New("the data file is closed")

// openOrderLog opens (creating it if needed) the data file at path and returns it with the
// records it already holds. Any line it cannot take in full is an error naming the file and the
// line: a record silently skipped would be an order the supplier denies having.
func openOrderLog(path string) (*orderLog, []logRecord, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		return nil, nil, fmt.Errorf("opening data file: %w", err)
	}
	recs, err := readRecords(f)
	if err != nil {
		_ = f.Close()
		return nil, nil, fmt.Errorf("reading data file %s: %w", path, err)
	}
	// Make the file's directory entry durable too, in case it was just created.
	if err := syncDir(filepath.Dir(path)); err != nil {
		_ = f.Close()
		return nil, nil, fmt.Errorf("syncing the directory of data file %s: %w", path, err)
	}
	return &orderLog{path: path, f: f}, recs, nil
}

func readRecords(r io.Reader) ([]logRecord, error) {
	var (
		recs []logRecord
		ids  = make(map[string]bool)
		keys = make(map[string]bool)
	)
	br := bufio.NewReader(r)
	for n := 1; ; n++ {
		line, err := br.ReadBytes('\n')
		if errors.Is(err, io.EOF) {
			if len(line) > 0 {
				// Every append ends in a newline before its fsync returns, so this is a write
				// cut short; its order never counted as committed, but dropping it is a decision
				// left to whoever looks at the file.
				return nil, fmt.Errorf("line %d is incomplete (a write cut short?): %.60q", n, line)
			}
			return recs, nil
		}
		if err != nil {
			return nil, err
		}
		rec, err := decodeRecord(line)
		if err != nil {
			return nil, fmt.Errorf("line %d: %w", n, err)
		}
		if ids[rec.Order.ID] {
			return nil, fmt.Errorf("line %d: order %s appears twice", n, rec.Order.ID)
		}
		ids[rec.Order.ID] = true
		if rec.Key != "" {
			if keys[rec.Key] {
				return nil, fmt.Errorf("line %d: idempotency key %q appears twice", n, rec.Key)
			}
			keys[rec.Key] = true
		}
		recs = append(recs, rec)
	}
}

func decodeRecord(line []byte) (logRecord, error) {
	var rec logRecord
	dec := json.NewDecoder(bytes.NewReader(line))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&rec); err != nil {
		return logRecord{}, fmt.Errorf("not a record: %w", err)
	}
	if dec.More() {
		return logRecord{}, errors.New("more than one JSON value")
	}
	o := rec.Order
	switch {
	case o == nil:
		return logRecord{}, errors.New(`no "order"`)
	case o.ID == "" || o.Status == "" || o.CreatedAt.IsZero():
		return logRecord{}, fmt.Errorf("order %q lacks its id, status or created_at", o.ID)
	case !bytes.HasPrefix(bytes.TrimSpace(o.Params), []byte("{")):
		return logRecord{}, fmt.Errorf("order %s: params must be a JSON object", o.ID)
	}
	if rec.Key == "" {
		if rec.Fingerprint != "" || rec.Status != 0 || len(rec.Body) != 0 {
			return logRecord{}, fmt.Errorf("order %s: a stored answer without an idempotency key", o.ID)
		}
		return rec, nil
	}
	if fp, err := hex.DecodeString(rec.Fingerprint); err != nil || len(fp) != 32 {
		return logRecord{}, fmt.Errorf("order %s: fingerprint must be 64 hex digits", o.ID)
	}
	if rec.Status < 100 || rec.Status > 599 || len(rec.Body) == 0 {
		return logRecord{}, fmt.Errorf("order %s: key %q lacks its stored status or body", o.ID, rec.Key)
	}
	return rec, nil
}

// appendLocked writes rec as one line and waits for it to reach the disk. l.mu must be held.
func (l *orderLog) appendLocked(rec logRecord) error {
	if l.err != nil {
		return l.err
	}
	b, err := json.Marshal(rec)
	if err != nil {
		return fmt.Errorf("encoding the record of order %s: %w", rec.Order.ID, err)
	}
	b = append(b, '\n')
	if _, err := l.f.Write(b); err != nil {
		l.err = fmt.Errorf("writing data file %s: %w", l.path, err)
		return l.err
	}
	if err := l.f.Sync(); err != nil {
		l.err = fmt.Errorf("syncing data file %s: %w", l.path, err)
		return l.err
	}
	return nil
}

// truncateLocked empties the file, for Reset. l.mu must be held.
func (l *orderLog) truncateLocked() error {
	if l.err != nil {
		return l.err
	}
	if err := l.f.Truncate(0); err != nil {
		l.err = fmt.Errorf("emptying data file %s: %w", l.path, err)
		return l.err
	}
	if err := l.f.Sync(); err != nil {
		l.err = fmt.Errorf("syncing data file %s: %w", l.path, err)
		return l.err
	}
	return nil
}

// close closes the file; later appends fail. It is idempotent.
func (l *orderLog) close() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.f == nil {
		return nil
	}
	err := l.f.Close()
	l.f, l.err = nil, errLogClosed
	return err
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

// load indexes the orders of recs and stores their keys' answers, as the server that wrote them
// had; called by Open before the server is shared.
func (s *Server) load(recs []logRecord) {
	for _, rec := range recs {
		s.orders.add(rec.Order)
		if rec.Key == "" {
			continue
		}
		e := &keyEntry{done: true, status: rec.Status, body: rec.Body}
		_, _ = hex.Decode(e.fingerprint[:], []byte(rec.Fingerprint)) // checked by decodeRecord
		s.keys[rec.Key] = e
	}
}
