package mocksupplier

import "net/http"

// keyEntry is what the supplier remembers about one Idempotency-Key: the fingerprint of the body
// first sent with it and, once that request has finished, the answer it got. Keys are kept for
// the whole run (until Reset), which covers any retention window a client may assume.
type keyEntry struct {
	fingerprint [32]byte
	done        bool
	status      int
	body        []byte
}

// answerRepeat answers a request whose key is already known.
func (s *Server) answerRepeat(w http.ResponseWriter, prev *keyEntry, fp [32]byte) {
	s.mu.Lock()
	done, status, body, same := prev.done, prev.status, prev.body, prev.fingerprint == fp
	s.mu.Unlock()
	switch {
	case !done:
		writeError(w, http.StatusConflict, "idempotency_key_in_use",
			"a request with this Idempotency-Key is still being processed")
	case !same:
		writeError(w, http.StatusBadRequest, "idempotency_key_reused",
			"this Idempotency-Key was used with a different request body")
	default:
		w.Header().Set("Idempotent-Replayed", "true")
		writeRaw(w, status, body)
	}
}

// storeAnswer records the answer of a request that reached the commit, so repeats replay it.
func (s *Server) storeAnswer(e *keyEntry, status int, body []byte) {
	if e == nil {
		return
	}
	s.mu.Lock()
	e.done, e.status, e.body = true, status, body
	s.mu.Unlock()
}

// releaseKey forgets a key whose request was refused before commit. The entry is compared too,
// so a Reset in between does not remove a newer request's key.
func (s *Server) releaseKey(key string, e *keyEntry) {
	if e == nil {
		return
	}
	s.mu.Lock()
	if s.keys[key] == e {
		delete(s.keys, key)
	}
	s.mu.Unlock()
}
