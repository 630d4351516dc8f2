package api

import (
	"errors"
	"fmt"
	"net/http"

	"github.com/google/uuid"

	"github.com/actledger/actledger/action"
	"github.com/actledger/actledger/auth"
	"github.com/actledger/actledger/internal/request"
	"github.com/actledger/actledger/ledger"
	"github.com/actledger/actledger/reconciler"
)

// Error is an API error with its HTTP status and machine-readable code.
type Error struct {
	Status  int
	Code    string
	Message string
	// Operation names the existing operation a refusal is about (the
	// operation that holds a reused key), so a caller learns where that
	// intention stands instead of routing around it.
	Operation *OperationRef
}

// OperationRef names an operation inside an error body.
type OperationRef struct {
	ID      uuid.UUID     `json:"id"`
	Status  ledger.Status `json:"status"`
	Summary string        `json:"summary"`
}

// errorBody is the JSON of every refusal: {"error": errorBody}.
type errorBody struct {
	Code      string        `json:"code"`
	Message   string        `json:"message"`
	Operation *OperationRef `json:"operation,omitempty"`
}

func (e *Error) Error() string { return e.Code + ": " + e.Message }

func errorf(status int, code, message string) *Error {
	return &Error{Status: status, Code: code, Message: message}
}

// Errors the handlers return directly.
var (
	errUnauthenticated = errorf(http.StatusUnauthorized, "unauthenticated", "a valid bearer token is required")
	errNotFound        = errorf(http.StatusNotFound, "not_found", "no such object")
	errUnavailable     = errorf(http.StatusServiceUnavailable, "unavailable", "a backing service is unavailable; retry later, nothing was changed")
	errRequestTimeout  = errorf(http.StatusRequestTimeout, "request_timeout", "the request body did not arrive in time; nothing was stored")
	errInternal        = errorf(http.StatusInternalServerError, "internal", "internal error; nothing was changed")
)

func errForbiddenRole(need ...string) *Error {
	msg := "this token's role may not do this; it needs role "
	for i, r := range need {
		if i > 0 {
			msg += " or "
		}
		msg += r
	}
	return errorf(http.StatusForbidden, "forbidden", msg)
}

// ErrorOf maps err to its status, code and message, as the API answers
// it: the console shows people the same words.
func ErrorOf(err error) *Error { return toAPIError(err) }

// toAPIError is the one place where errors become statuses and codes.
func toAPIError(err error) *Error {
	var apiErr *Error
	var approvalErr *ledger.ApprovalError
	var maxBytes *http.MaxBytesError
	var paramsErr *action.ParamsError
	var conflict *ledger.KeyConflictError
	var refusal *request.Error
	switch {
	case errors.As(err, &paramsErr):
		return errorf(http.StatusUnprocessableEntity, "invalid_params", paramsErr.Error())
	case errors.Is(err, ledger.ErrNotAwaitingApproval):
		return errorf(http.StatusConflict, "not_awaiting_approval", "this operation is not awaiting approval (it was decided already, or it lapsed)")
	case errors.Is(err, ledger.ErrFingerprintMismatch):
		return errorf(http.StatusConflict, "fingerprint_mismatch",
			"params_fingerprint is not the proposal's: what was shown is not what would be approved; nothing changed")
	case errors.As(err, &apiErr):
		return apiErr
	case errors.As(err, &refusal):
		return errorf(http.StatusBadRequest, refusal.Code, refusal.Message)
	case errors.As(err, &approvalErr):
		return errorf(http.StatusForbidden, string(approvalErr.Code), approvalErr.Reason)
	case errors.As(err, &maxBytes):
		return errorf(http.StatusRequestEntityTooLarge, "body_too_large", "the request body is over the size limit")
	case errors.Is(err, ledger.ErrNotFound):
		return errNotFound
	case errors.As(err, &conflict):
		op := conflict.Existing
		e := errorf(http.StatusConflict, "key_reused_with_different_params", fmt.Sprintf(
			"key %q of action %s is operation %s (%s), with other params; nothing was sent. %s",
			op.Key, op.Action, op.ID, op.Status, op.Summary()))
		e.Operation = &OperationRef{ID: op.ID, Status: op.Status, Summary: op.Summary()}
		return e
	case errors.Is(err, ledger.ErrKeyConflict):
		return errorf(http.StatusConflict, "key_reused_with_different_params",
			"this key was already used for this action with different params; nothing was sent")
	case errors.Is(err, ledger.ErrKeyInUseElsewhere):
		// Keys are unique per tenant; the operation that holds this one is
		// outside the caller's scope, and nothing of it is told.
		return errorf(http.StatusConflict, "key_in_use_elsewhere",
			"this key of this action is in use outside your scope; nothing was stored or sent. A new intention needs another key")
	case errors.Is(err, ledger.ErrWholeTenantOnly):
		return errorf(http.StatusForbidden, "forbidden",
			"this acts on every scope of the tenant: it needs a token without a scope")
	case errors.Is(err, ledger.ErrInvalidParams):
		return errorf(http.StatusBadRequest, "invalid_field", "params: "+err.Error())
	case errors.Is(err, reconciler.ErrNotResolvable):
		return errorf(http.StatusConflict, "not_resolvable", err.Error())
	case errors.Is(err, reconciler.ErrRetryNotAllowed):
		return errorf(http.StatusConflict, "retry_not_allowed", err.Error())
	case errors.Is(err, reconciler.ErrBadResolution):
		return errorf(http.StatusBadRequest, "invalid_resolution", err.Error())
	case errors.Is(err, auth.ErrUnauthenticated), errors.Is(err, ledger.ErrApproverRevoked):
		// A decision whose token was revoked while it was being made is
		// the revoked token's request: 401, nothing granted.
		return errUnauthenticated
	case ledger.Unavailable(err):
		return errUnavailable
	default:
		return errInternal
	}
}

// writeError answers with err mapped to its status and code; unexpected
// errors are logged, and the client sees no internals.
func (s *Server) writeError(w http.ResponseWriter, r *http.Request, err error) {
	e := toAPIError(err)
	if e.Status >= 500 {
		s.log.ErrorContext(r.Context(), "request failed", "method", r.Method, "path", r.URL.Path, "status", e.Status, "err", err)
	}
	writeJSON(w, e.Status, map[string]any{"error": errorBody{Code: e.Code, Message: e.Message, Operation: e.Operation}})
}
