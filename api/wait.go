package api

import (
	"context"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/actledger/actledger/auth"
	"github.com/actledger/actledger/ledger"
	"github.com/actledger/actledger/view"
)

// MaxWait is the longest GET /v1/operations/{id}?wait= may wait for a
// change. A client that wants longer asks again with the ETag it got.
const MaxWait = 60 * time.Second

// waitWriteMargin is what a long poll leaves itself, past its wait, to
// read the operation once more and write the answer.
const waitWriteMargin = 10 * time.Second

// OperationWatcher wakes readers waiting for an operation to change
// (ledger.Watcher). Watch registers interest in operation id; changed
// receives a value whenever it may have changed since Watch returned; stop
// unregisters.
type OperationWatcher interface {
	Watch(ctx context.Context, id uuid.UUID) (changed <-chan struct{}, stop func(), err error)
}

// etag is an operation's entity tag: its version, which every change of
// the operation moves.
func etag(op ledger.Operation) string {
	return `"` + strconv.FormatInt(op.Version, 10) + `"`
}

// writeOperation writes op's view with its ETag. Every answer that
// carries an operation goes through it, so a client can wait for the next
// change of what it was given (If-None-Match with ?wait=).
func writeOperation(w http.ResponseWriter, status int, op ledger.Operation) {
	w.Header().Set("ETag", etag(op))
	writeJSON(w, status, view.OfOperation(op))
}

// noneMatch reports whether the If-None-Match header lists tag (weak
// comparison, as RFC 9110 wants for If-None-Match) or is "*".
func noneMatch(header, tag string) bool {
	for _, t := range strings.Split(header, ",") {
		t = strings.TrimPrefix(strings.TrimSpace(t), "W/")
		if t == "*" || t == tag {
			return true
		}
	}
	return false
}

// readWait parses the wait query parameter: a Go duration ("25s", "1m")
// or whole seconds ("25"), 0 to MaxWait. Absent means 0.
func readWait(r *http.Request) (time.Duration, error) {
	raw := r.URL.Query().Get("wait")
	if raw == "" {
		return 0, nil
	}
	d, err := time.ParseDuration(raw)
	if err != nil {
		secs, serr := strconv.ParseInt(raw, 10, 64)
		if serr != nil || secs > int64(MaxWait/time.Second) {
			return 0, errorf(http.StatusBadRequest, "invalid_query", "wait must be a duration such as 25s, at most 60s")
		}
		d = time.Duration(secs) * time.Second
	}
	if d < 0 || d > MaxWait {
		return 0, errorf(http.StatusBadRequest, "invalid_query", "wait must be a duration such as 25s, at most 60s")
	}
	return d, nil
}

// waitBudget is how much longer than Config.RequestTimeout a request may
// take: its wait, when it asks for a valid one.
func waitBudget(r *http.Request) time.Duration {
	d, err := readWait(r)
	if err != nil {
		return 0
	}
	return d
}

// getOperation is GET /v1/operations/{id}, optionally conditional and
// long-polling: with If-None-Match naming the current ETag it answers 304,
// at once without ?wait=, or as soon as the operation changes (200, the
// new view) and 304 when the wait runs out.
func (s *Server) getOperation(w http.ResponseWriter, r *http.Request, p auth.Principal) {
	id, err := uuid.Parse(r.PathValue("id"))
	if err != nil {
		s.writeError(w, r, errNotFound)
		return
	}
	wait, err := readWait(r)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	op, err := s.cfg.Ledger.Get(r.Context(), p.Access(), id)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	inm := r.Header.Get("If-None-Match")
	if inm == "" || !noneMatch(inm, etag(op)) {
		writeOperation(w, http.StatusOK, op)
		return
	}
	if wait > 0 {
		op, err = s.awaitChange(w, r, p, op, wait, inm)
		if err != nil {
			s.writeError(w, r, err)
			return
		}
		if r.Context().Err() != nil {
			return // the client went away, or the request's budget ran out
		}
		if !noneMatch(inm, etag(op)) {
			writeOperation(w, http.StatusOK, op)
			return
		}
	}
	w.Header().Set("ETag", etag(op))
	w.WriteHeader(http.StatusNotModified)
}

// awaitChange waits at most wait for operation op to get another ETag than
// those If-None-Match names, and returns the operation as last read. It
// registers with the watcher before reading again, so a change between
// the first read and the wait still wakes it. When the wait runs out (or
// the server drains) it reads once more, watcher or not: a wake-up can be
// missed while the watcher's listening connection is down, and a 304 must
// never claim an operation is unchanged when it is not.
func (s *Server) awaitChange(w http.ResponseWriter, r *http.Request, p auth.Principal, op ledger.Operation, wait time.Duration, inm string) (ledger.Operation, error) {
	if err := ExtendWriteDeadline(w, wait+waitWriteMargin); err != nil {
		s.log.DebugContext(r.Context(), "cannot extend the write deadline of a long poll", "err", err)
	}
	timer := time.NewTimer(wait)
	defer timer.Stop()
	var changed <-chan struct{} // nil without a watcher: only the wait ends
	if s.cfg.Watcher != nil {
		ch, stop, err := s.cfg.Watcher.Watch(r.Context(), op.ID)
		if err != nil {
			return op, err
		}
		defer stop()
		changed = ch
	}
	for {
		if changed != nil {
			next, err := s.cfg.Ledger.Get(r.Context(), p.Access(), op.ID)
			if err != nil {
				return op, err
			}
			if op = next; !noneMatch(inm, etag(op)) {
				return op, nil
			}
		}
		select {
		case <-changed:
		case <-timer.C:
			return s.cfg.Ledger.Get(r.Context(), p.Access(), op.ID)
		case <-s.draining:
			return s.cfg.Ledger.Get(r.Context(), p.Access(), op.ID)
		case <-r.Context().Done():
			return op, nil
		}
	}
}
