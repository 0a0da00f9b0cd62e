package clasp

import (
	"errors"
	"fmt"
)

// Error codes of the JSON error body (RULES.md, Errors and requests). They are stable: clients match on them.
const (
	CodeInvalidRequest       = "invalid_request"        // 400: malformed JSON, unknown field, bad enum or UUID, missing field
	CodeBodyTooLarge         = "body_too_large"         // 413: request body over the cap (1 MiB)
	CodeRequestTimeout       = "request_timeout"        // 408: the request body did not arrive in time
	CodeUnauthenticated      = "unauthenticated"        // 401: no, bad, revoked or terminated credentials
	CodeRunIDRequired        = "run_id_required"        // 401: an agent call that needs a run sent no run header
	CodeForbidden            = "forbidden"              // 403: the actor may not do this
	CodeAgentMismatch        = "agent_mismatch"         // 403: checkout agentId is not the calling agent
	CodeRunNotOwned          = "run_not_owned"          // 403: the named run belongs to another agent
	CodeNotFound             = "not_found"              // 404: missing or not visible to the actor
	CodeCheckoutConflict     = "checkout_conflict"      // 409: rule L1 refused the checkout
	CodeOwnershipConflict    = "ownership_conflict"     // 409: rules L4/L5 refused a write by a non-holder
	CodeRunNotLive           = "run_not_live"           // 409: the named run is terminal or lost
	CodeAlreadyExists        = "already_exists"         // 409: a unique name or prefix is taken
	CodeIdempotencyInFlight  = "idempotency_in_flight"  // 409: the first request with this Idempotency-Key is still running (no longer sent: the key is recorded in the creating transaction)
	CodePreconditionFailed   = "precondition_failed"    // 422: a state precondition failed (e.g. checkout of a done issue)
	CodeRunNotFound          = "run_not_found"          // 422: the named run does not exist
	CodeIdempotencyKeyReused = "idempotency_key_reused" // 422: same Idempotency-Key, different body
	CodeBlockedByUnresolved  = "blocked_by_unresolved"  // 422: entering in_progress or done while a blocker is not done (details.unresolvedBlockerIssueIds)
	CodeDependencyCycle      = "dependency_cycle"       // 422: a blocker or parent edge would close a cycle (details.cycle: the identifiers)
	CodeMethodNotAllowed     = "method_not_allowed"     // 405: the path exists, the method does not
	CodeUnsupportedMediaType = "unsupported_media_type" // 415: a write whose body is not sent as application/json
	CodeHeaderTooLarge       = "headers_too_large"      // 431: the request's header is over 64 KiB
	CodeRateLimited          = "rate_limited"           // 429: over a rate limit or a cap (Retry-After says when to retry)
	CodeUnavailable          = "unavailable"            // 503: the database is unreachable or the server is stopping
	CodeClientClosedRequest  = "client_closed_request"  // 499: the client went away (closed the connection or gave up) before the answer; no client reads it, logs and metrics do
	CodeInternal             = "internal"               // 500: a bug or an unexpected database failure; never for bad input
)

// Checkout conflict reasons (details.reason of a 409 checkout_conflict, rule L1).
const (
	ReasonHeldByLiveRun        = "held_by_live_run"
	ReasonAssignedToOtherAgent = "assigned_to_other_agent"
	ReasonStatusNotExpected    = "status_not_expected"
)

// Error is the application error shared by server, client and CLI. Message is
// a human sentence that tells the caller what went wrong and what to do;
// Code is one of the Code* constants; Details carries machine-readable
// context (for a checkout conflict: the holder). It is the JSON error body
// {"error", "code", "details"} (RULES.md, Errors and requests).
type Error struct {
	Code    string         `json:"code"`
	Message string         `json:"error"`
	Details map[string]any `json:"details"`
	// Status is the HTTP status the error was received with (client side
	// only; the server derives it from Code). Zero when unknown.
	Status int `json:"-"`
}

// Error implements error.
func (e *Error) Error() string {
	if e.Status != 0 {
		return fmt.Sprintf("%s (%d %s)", e.Message, e.Status, e.Code)
	}
	return fmt.Sprintf("%s (%s)", e.Message, e.Code)
}

// Errorf returns an *Error with the given code and a message built like fmt.Sprintf.
func Errorf(code, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...)}
}

// WithDetails sets key/value pairs on e.Details and returns e.
func (e *Error) WithDetails(kv ...any) *Error {
	if e.Details == nil {
		e.Details = map[string]any{}
	}
	for i := 0; i+1 < len(kv); i += 2 {
		k, _ := kv[i].(string)
		e.Details[k] = kv[i+1]
	}
	return e
}

// InvalidField returns a 400 invalid_request error naming the offending field
// in details.field (RULES.md, Errors and requests).
func InvalidField(field, format string, args ...any) *Error {
	return Errorf(CodeInvalidRequest, format, args...).WithDetails("field", field)
}

// ErrorCode returns the code of the first *Error in err's chain, "" for a nil
// err and CodeInternal for any other error.
func ErrorCode(err error) string {
	if err == nil {
		return ""
	}
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	return CodeInternal
}

// AsError returns the first *Error in err's chain, or nil.
func AsError(err error) *Error {
	var e *Error
	if errors.As(err, &e) {
		return e
	}
	return nil
}
