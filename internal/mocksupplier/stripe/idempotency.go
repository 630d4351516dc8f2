package stripe

import (
	"crypto/sha256"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/actledger/actledger/internal/mocksupplier/fault"
)

// maxKeyLength is Stripe's limit on an Idempotency-Key.
const maxKeyLength = 255

// keyEntry is what the fake remembers about one Idempotency-Key: the fingerprint of the first
// request that used it (endpoint and parameters), when that was, and, once the request has
// finished, the answer it got.
type keyEntry struct {
	fingerprint [32]byte
	first       time.Time
	done        bool
	status      int
	body        []byte
}

// fingerprint identifies a request for the idempotency layer: method, path and the parameters in
// canonical order (url.Values.Encode sorts by name), so the same parameters sent in another order
// are the same request, and the same key on the other endpoint is not.
func fingerprint(method, path string, form url.Values) [32]byte {
	return sha256.Sum256([]byte(method + " " + path + "\n" + form.Encode()))
}

// refusal is an answer given before anything was executed: nothing is stored under the key.
type refusal struct {
	status int
	err    ErrorObject
}

func invalid(code, param, message string) *refusal {
	return &refusal{status: http.StatusBadRequest, err: ErrorObject{
		Type: "invalid_request_error", Code: code, Param: param, Message: message,
	}}
}

// outcome is what executing a create produced: the answer and the events it emits.
type outcome struct {
	status int
	body   []byte
	events []Event
}

// createSpec is what differs between the two creates.
type createSpec struct {
	path string
	// check validates the parameters against the request alone and the current state; s.mu is
	// held. A refusal is answered and stores nothing.
	check func(form url.Values) *refusal
	// commit executes the create (check has passed, and is repeated under the same lock, since
	// the state may have changed); fault is the execution fault taken, if any. s.mu is held.
	commit func(form url.Values, key string, fault *Fault) (outcome, *refusal)
}

// create is the pipeline both creates share, in Stripe's order: rate limiting before the
// idempotency layer, then the key (replay, mismatch, in flight), then validation, then the
// execution, whose answer is stored under the key.
func (s *Server) create(w http.ResponseWriter, r *http.Request, spec createSpec) {
	ctx := r.Context()
	form, ref := parseForm(r)
	if ref != nil {
		writeError(w, ref.status, ref.err)
		return
	}

	s.mu.Lock()
	if f, ok := s.takeFaultLocked(spec.path, true); ok {
		s.mu.Unlock()
		s.log.InfoContext(ctx, "fault injected", "fault", string(f.Kind), "path", spec.path)
		if f.RetryAfter > 0 {
			w.Header().Set("Retry-After", strconv.FormatInt(retryAfterSeconds(f.RetryAfter), 10))
		}
		if f.Kind == RateLimited {
			writeError(w, http.StatusTooManyRequests, ErrorObject{
				Type: "invalid_request_error", Code: "rate_limit",
				Message: "Too many requests hit the API too quickly. We recommend an exponential backoff of your requests.",
			})
		} else {
			writeError(w, http.StatusServiceUnavailable, ErrorObject{
				Type: "api_error", Message: "The service is temporarily unavailable. Please retry.",
			})
		}
		return
	}

	key := r.Header.Get("Idempotency-Key")
	if len(key) > maxKeyLength {
		s.mu.Unlock()
		writeError(w, http.StatusBadRequest, ErrorObject{
			Type:    "invalid_request_error",
			Message: "Idempotency keys can be at most 255 characters long.",
		})
		return
	}
	fp := fingerprint(r.Method, spec.path, form)
	var entry *keyEntry
	if key != "" {
		now := s.now()
		if prev, found := s.keys[key]; found && now.Sub(prev.first) >= s.retention {
			delete(s.keys, key) // pruned: a reuse is a new request
		}
		if prev, found := s.keys[key]; found {
			done, status, body, same := prev.done, prev.status, prev.body, prev.fingerprint == fp
			s.mu.Unlock()
			answerRepeat(w, done, same, status, body)
			return
		}
		entry = &keyEntry{fingerprint: fp, first: now}
		s.keys[key] = entry
	}
	if ref := spec.check(form); ref != nil {
		s.releaseKeyLocked(key, entry)
		s.mu.Unlock()
		writeError(w, ref.status, ref.err)
		return
	}
	taken, faulty := s.takeFaultLocked(spec.path, false)
	if faulty {
		s.log.InfoContext(ctx, "fault injected", "fault", string(taken.Kind), "path", spec.path)
	}
	switch {
	case faulty && taken.Kind == KeyInUse:
		s.releaseKeyLocked(key, entry)
		s.mu.Unlock()
		writeError(w, http.StatusConflict, keyInUseError())
		return
	case faulty && taken.Kind == DropBeforeCommit:
		s.releaseKeyLocked(key, entry)
		s.mu.Unlock()
		fault.DropConnection(w)
		return
	}
	var execFault *Fault
	if faulty {
		execFault = &taken
	}
	out, ref := spec.commit(form, key, execFault)
	if ref != nil {
		s.releaseKeyLocked(key, entry)
		s.mu.Unlock()
		writeError(w, ref.status, ref.err)
		return
	}
	if faulty && taken.Kind == Error500AfterCommit {
		out.status, out.body = http.StatusInternalServerError, errorJSON(ErrorObject{
			Type: "api_error", Message: "An unknown error occurred.",
		})
	}
	s.scheduleLocked(out.events)
	s.mu.Unlock()

	if faulty && taken.Kind == DelayAfterCommit {
		// The object exists already; a client that gives up now has lost the answer to it.
		// The key stays in flight (409 to a repeat) until the answer is stored.
		fault.Hold(ctx, taken.Delay)
	}
	s.storeAnswer(entry, out.status, out.body)
	if faulty && taken.Kind == DropAfterCommit {
		fault.DropConnection(w)
		return
	}
	writeRaw(w, out.status, out.body)
}

// answerRepeat answers a request whose key is known: 409 while the first is still executing,
// 400 idempotency_error if the endpoint or parameters differ, otherwise the stored answer with
// Idempotent-Replayed: true.
func answerRepeat(w http.ResponseWriter, done, same bool, status int, body []byte) {
	switch {
	case !same:
		writeError(w, http.StatusBadRequest, ErrorObject{
			Type: "idempotency_error",
			Message: "Keys for idempotent requests can only be used with the same parameters they were first used with. " +
				"Try using a key other than the one you used.",
		})
	case !done:
		writeError(w, http.StatusConflict, keyInUseError())
	default:
		w.Header().Set("Idempotent-Replayed", "true")
		writeRaw(w, status, body)
	}
}

func keyInUseError() ErrorObject {
	return ErrorObject{
		Type: "invalid_request_error", Code: "idempotency_key_in_use",
		Message: "There is currently another in-progress request using this Idempotency Key. Please try again later.",
	}
}

// storeAnswer records the answer of a request that was executed, so repeats replay it.
func (s *Server) storeAnswer(e *keyEntry, status int, body []byte) {
	if e == nil {
		return
	}
	s.mu.Lock()
	e.done, e.status, e.body = true, status, body
	s.mu.Unlock()
}

// releaseKeyLocked forgets a key whose request was refused before execution: Stripe stores no
// result then, and a retry runs afresh. s.mu must be held.
func (s *Server) releaseKeyLocked(key string, e *keyEntry) {
	if e != nil && s.keys[key] == e {
		delete(s.keys, key)
	}
}
