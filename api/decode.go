package api

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
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
	return decodeJSON(body, v)
}

// decodeJSON decodes body into v strictly: one JSON object, no unknown
// fields, every type right. Errors name the field and answer 400.
func decodeJSON(body []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return jsonError(err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return errorf(http.StatusBadRequest, "malformed_json", "the body must hold exactly one JSON object")
	}
	return nil
}

func jsonError(err error) *Error {
	var syntaxErr *json.SyntaxError
	var typeErr *json.UnmarshalTypeError
	switch {
	case errors.Is(err, io.EOF):
		return errorf(http.StatusBadRequest, "malformed_json", "the body is empty; a JSON object is required")
	case errors.As(err, &syntaxErr):
		return errorf(http.StatusBadRequest, "malformed_json", fmt.Sprintf("malformed JSON at byte %d: %v", syntaxErr.Offset, err))
	case errors.Is(err, io.ErrUnexpectedEOF):
		return errorf(http.StatusBadRequest, "malformed_json", "malformed JSON: unexpected end of input")
	case errors.As(err, &typeErr):
		field := typeErr.Field
		if field == "" {
			return errorf(http.StatusBadRequest, "malformed_json", "the body must be a JSON object")
		}
		return errorf(http.StatusBadRequest, "invalid_field", fmt.Sprintf("%s: must be %s, not %s", field, typeName(typeErr.Type.String()), typeErr.Value))
	case strings.HasPrefix(err.Error(), "json: unknown field "):
		field := strings.Trim(strings.TrimPrefix(err.Error(), "json: unknown field "), `"`)
		return errorf(http.StatusBadRequest, "unknown_field", fmt.Sprintf("%s: unknown field", field))
	default:
		return errorf(http.StatusBadRequest, "malformed_json", "malformed JSON: "+err.Error())
	}
}

func typeName(goType string) string {
	switch {
	case strings.HasPrefix(goType, "int"), strings.HasPrefix(goType, "*int"):
		return "an integer"
	case strings.Contains(goType, "string"):
		return "a string"
	case strings.Contains(goType, "Time"):
		return "an RFC 3339 time"
	default:
		return "a " + strings.TrimPrefix(goType, "*")
	}
}

// fieldError is a 400 naming the field that is wrong.
func fieldError(field, problem string) *Error {
	return errorf(http.StatusBadRequest, "invalid_field", field+": "+problem)
}

// noNUL is the problem named when a field holds U+0000.
const noNUL = `must not contain \u0000 (U+0000 cannot be stored)`

// hasNULEscape reports whether the JSON text body holds the escape \u0000
// (as opposed to an escaped backslash followed by "u0000"). Postgres cannot
// store U+0000 in jsonb or text, so such input is refused as a 400 naming
// its field instead of failing the insert with a 500 on every retry.
func hasNULEscape(body []byte) bool {
	const esc = `\u0000`
	for i := 0; ; {
		j := bytes.Index(body[i:], []byte(esc))
		if j < 0 {
			return false
		}
		at := i + j
		backslashes := 0
		for k := at; k >= 0 && body[k] == '\\'; k-- {
			backslashes++
		}
		if backslashes%2 == 1 {
			return true
		}
		i = at + len(esc)
	}
}
