package api

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"

	"github.com/actledger/actledger/internal/request"
	"github.com/actledger/actledger/ledger"
)

// DefaultMaxBody is the default request body limit (1 MiB).
const DefaultMaxBody = 1 << 20

// readBody reads the whole body under the size limit; a larger body is an
// *http.MaxBytesError (413), refused before any JSON is looked at.
func (s *Server) readBody(w http.ResponseWriter, r *http.Request) ([]byte, error) {
	if r.ContentLength > s.cfg.MaxBody {
		return nil, &http.MaxBytesError{Limit: s.cfg.MaxBody}
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, s.cfg.MaxBody))
	if err != nil {
		var maxBytes *http.MaxBytesError
		if errors.As(err, &maxBytes) {
			return nil, err
		}
		var netErr net.Error
		if errors.As(err, &netErr) && netErr.Timeout() {
			// HTTPLimits.ReadTimeout ran out: a client trickling its body.
			return nil, errRequestTimeout
		}
		return nil, errorf(http.StatusBadRequest, "invalid_body", "could not read the request body")
	}
	return body, nil
}

// readJSON reads the body under the size limit and decodes it strictly into
// v. An empty body leaves v as it is when optional is set (all its fields
// are optional), and is malformed JSON otherwise.
func (s *Server) readJSON(w http.ResponseWriter, r *http.Request, v any, optional bool) error {
	body, err := s.readBody(w, r)
	if err != nil {
		return err
	}
	if optional && len(bytes.TrimSpace(body)) == 0 {
		return nil
	}
	return request.Decode(body, v)
}

// canonicalParams is params in the canonical form the ledger stores (RFC
// 8785), so that what the action's schema and policy judge is what is kept,
// shown and sent: a literal 1e-400 is the 0 the ledger would store.
// Params that cannot be canonicalised are returned as they are, for the
// ledger to refuse.
func canonicalParams(params json.RawMessage) json.RawMessage {
	canonical, _, err := ledger.Canonicalize(params)
	if err != nil {
		return params
	}
	return canonical
}
