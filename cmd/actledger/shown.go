package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"reflect"

	"github.com/actledger/actledger/internal/display"
)

// printf is fmt.Fprintf for output that shows what the server sent: every
// argument that is text (a string or a type of one, JSON bytes) is shown
// through display.Line first, so a key, a reason or params holding a line
// break, an ESC or an invisible character cannot forge or conceal a line
// of what an approver or operator reads. The format is the CLI's own.
func printf(w io.Writer, format string, args ...any) {
	for i, a := range args {
		args[i] = shown(a)
	}
	fmt.Fprintf(w, format, args...)
}

// shown is a for printf: text escaped, anything else as it is.
func shown(a any) any {
	switch v := a.(type) {
	case nil:
		return a
	case string:
		return display.Line(v)
	case json.RawMessage:
		return display.Line(string(v))
	case []byte:
		return display.Line(string(v))
	case error:
		return display.Line(v.Error())
	}
	rv := reflect.ValueOf(a)
	switch {
	case rv.Kind() == reflect.String:
		return display.Line(rv.String())
	case rv.Kind() == reflect.Pointer && !rv.IsNil() && rv.Elem().Kind() == reflect.String:
		return display.Line(rv.Elem().String())
	}
	return a
}

// shownError is an error of a command that talks to the server, whose
// text (the server's message among it) is printed through display.Line;
// it still wraps the error, so errUsage keeps its exit status.
type shownError struct{ err error }

func (e *shownError) Error() string { return display.Line(e.err.Error()) }
func (e *shownError) Unwrap() error { return e.err }

// showErrors wraps err, if any, as a shownError.
func showErrors(err error) error {
	if err == nil || errors.As(err, new(*shownError)) {
		return err
	}
	return &shownError{err: err}
}
