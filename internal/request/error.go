package request

// The codes of a refusal, as the API answers them (with status 400).
const (
	CodeMalformedJSON = "malformed_json"
	CodeUnknownField  = "unknown_field"
	CodeInvalidField  = "invalid_field"
)

// Codes lists every code an *Error carries, for the OpenAPI document's
// test to hold against the document.
var Codes = []string{CodeMalformedJSON, CodeUnknownField, CodeInvalidField}

// Error is a refusal of a request body: the api package answers it as a
// 400 with Code and Message.
type Error struct {
	Code    string // one of Codes
	Message string
}

func (e *Error) Error() string { return e.Code + ": " + e.Message }

// FieldError refuses the field named by field (a path such as
// "params.items[2].qty"), saying what is wrong with it.
func FieldError(field, problem string) *Error {
	return &Error{Code: CodeInvalidField, Message: field + ": " + problem}
}

func malformed(message string) *Error {
	return &Error{Code: CodeMalformedJSON, Message: message}
}
