package request

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
)

// Decode decodes body into v strictly: one JSON object, no unknown
// fields, every type right. Its
// refusals are *Error values naming the field.
func Decode(body []byte, v any) error {
	// encoding/json decodes a null into a struct as nothing at all, so a
	// body of null would pass as {} (on the stop button: pause everything).
	// Every body the API takes is an object; anything else is refused
	// before it is decoded, like an array is.
	if trimmed := bytes.TrimLeft(body, " \t\r\n"); len(trimmed) > 0 && trimmed[0] != '{' && json.Valid(body) {
		return errNotAnObject
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return jsonError(err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return malformed("the body must hold exactly one JSON object")
	}
	return nil
}

// DecodeIgnoringUnknown is Decode for a supplier's webhook body: a
// supplier adding a field must not have its webhooks refused. It still
// requires exactly one JSON object with the known fields of the right type.
func DecodeIgnoringUnknown(body []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(body))
	if err := dec.Decode(v); err != nil {
		return jsonError(err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return malformed("the body must hold exactly one JSON object")
	}
	if len(body) > 0 && bytes.TrimSpace(body)[0] != '{' {
		return errNotAnObject
	}
	return nil
}

// errNotAnObject refuses a body that is JSON but not an object.
var errNotAnObject = malformed("the body must be a JSON object")

func jsonError(err error) *Error {
	var syntaxErr *json.SyntaxError
	var typeErr *json.UnmarshalTypeError
	switch {
	case errors.Is(err, io.EOF):
		return malformed("the body is empty; a JSON object is required")
	case errors.As(err, &syntaxErr):
		return malformed(fmt.Sprintf("malformed JSON at byte %d: %v", syntaxErr.Offset, err))
	case errors.Is(err, io.ErrUnexpectedEOF):
		return malformed("malformed JSON: unexpected end of input")
	case errors.As(err, &typeErr):
		field := typeErr.Field
		if field == "" {
			return errNotAnObject
		}
		return FieldError(field, fmt.Sprintf("must be %s, not %s", typeName(typeErr.Type.String()), typeErr.Value))
	case strings.HasPrefix(err.Error(), "json: unknown field "):
		field := strings.Trim(strings.TrimPrefix(err.Error(), "json: unknown field "), `"`)
		return &Error{Code: CodeUnknownField, Message: field + ": unknown field"}
	default:
		return malformed("malformed JSON: " + err.Error())
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
