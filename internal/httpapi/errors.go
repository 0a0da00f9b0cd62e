package httpapi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"
	"slices"
	"strconv"
	"unicode/utf8"

	"github.com/clasp-dev/clasp"
)

// codeStatus maps every clasp error code to its HTTP status (RULES.md, Errors and requests).
// It is the only place a status is chosen for an error.
var codeStatus = map[string]int{
	clasp.CodeInvalidRequest:       http.StatusBadRequest,
	clasp.CodeUnauthenticated:      http.StatusUnauthorized,
	clasp.CodeRunIDRequired:        http.StatusUnauthorized,
	clasp.CodeForbidden:            http.StatusForbidden,
	clasp.CodeAgentMismatch:        http.StatusForbidden,
	clasp.CodeRunNotOwned:          http.StatusForbidden,
	clasp.CodeNotFound:             http.StatusNotFound,
	clasp.CodeMethodNotAllowed:     http.StatusMethodNotAllowed,
	clasp.CodeCheckoutConflict:     http.StatusConflict,
	clasp.CodeOwnershipConflict:    http.StatusConflict,
	clasp.CodeRunNotLive:           http.StatusConflict,
	clasp.CodeAlreadyExists:        http.StatusConflict,
	clasp.CodeIdempotencyInFlight:  http.StatusConflict,
	clasp.CodeBodyTooLarge:         http.StatusRequestEntityTooLarge,
	clasp.CodeRequestTimeout:       http.StatusRequestTimeout,
	clasp.CodePreconditionFailed:   http.StatusUnprocessableEntity,
	clasp.CodeRunNotFound:          http.StatusUnprocessableEntity,
	clasp.CodeIdempotencyKeyReused: http.StatusUnprocessableEntity,
	clasp.CodeBlockedByUnresolved:  http.StatusUnprocessableEntity,
	clasp.CodeDependencyCycle:      http.StatusUnprocessableEntity,
	clasp.CodeUnsupportedMediaType: http.StatusUnsupportedMediaType,
	clasp.CodeHeaderTooLarge:       http.StatusRequestHeaderFieldsTooLarge,
	clasp.CodeRateLimited:          http.StatusTooManyRequests,
	clasp.CodeUnavailable:          http.StatusServiceUnavailable,
	clasp.CodeInternal:             http.StatusInternalServerError,
	clasp.CodeClientClosedRequest:  StatusClientClosedRequest,
}

// StatusClientClosedRequest (499, the status nginx gave this case) is what
// a request answers when its client went away before the answer was
// ready: the request's context ended, and the error the store or a stream
// returned is that context's. It is not a server fault, so never a 500.
const StatusClientClosedRequest = 499

// errorBody is the JSON error body (RULES.md, Errors and requests).
type errorBody struct {
	Error   string         `json:"error"`
	Code    string         `json:"code"`
	Details map[string]any `json:"details"`
}

// internalBody is the only body a 500 ever has: internal text is logged, not sent.
var internalBody = errorBody{Error: "internal error", Code: clasp.CodeInternal, Details: map[string]any{}}

// statusOf returns the status and body for err. Errors that are not a
// *clasp.Error with a known code are internal (500).
func statusOf(err error) (int, errorBody, bool) {
	e := clasp.AsError(err)
	if e == nil {
		return http.StatusInternalServerError, internalBody, false
	}
	st, ok := codeStatus[e.Code]
	if !ok || st == http.StatusInternalServerError {
		return http.StatusInternalServerError, internalBody, false
	}
	d := e.Details
	if d == nil {
		d = map[string]any{}
	}
	msg := e.Message
	if msg == "" {
		msg = http.StatusText(st)
	}
	return st, errorBody{Error: msg, Code: e.Code, Details: d}, true
}

// writeError writes err as a JSON error response: the status of its code
// and {"error", "code", "details"}, details always carrying the request's
// id (requestId). Anything that is not an expected *clasp.Error answers
// 500 {"error":"internal error","code":"internal","details":{"requestId":
// ...}}, and only the log sees its text. 401 answers carry
// WWW-Authenticate: Bearer; 429 answers carry Retry-After (whole seconds,
// at least 1): the one already set, or else details.retryAfterSeconds.
func (s *Server) writeError(w http.ResponseWriter, r *http.Request, err error) {
	rid := RequestIDFrom(r.Context())
	if clientGone(r, err) {
		s.log.Debug("client went away before the answer", "method", r.Method, "path", r.URL.Path, "request_id", rid, "err", err)
		err = clasp.Errorf(clasp.CodeClientClosedRequest, "The client went away before the answer was ready.")
	}
	st, body, expected := statusOf(err)
	if !expected {
		s.log.Error("internal error", "method", r.Method, "path", r.URL.Path, "request_id", rid, "err", err)
	}
	if st == http.StatusUnauthorized {
		w.Header().Set("WWW-Authenticate", `Bearer realm="clasp"`)
	}
	if st == http.StatusTooManyRequests && w.Header().Get("Retry-After") == "" {
		w.Header().Set("Retry-After", strconv.Itoa(retryAfterSeconds(body.Details)))
	}
	b := append(appendErrorBody(make([]byte, 0, 512), body, rid), '\n')
	setJSONHeaders(w, st)
	_, _ = w.Write(b) // #nosec G705 -- a JSON body (application/json, nosniff) whose strings are escaped as encoding/json escapes them, <, > and & included
}

// retryAfterSeconds returns details.retryAfterSeconds of a 429's details
// as whole seconds, rounded up and at least 1; 1 when it is missing or not
// a number.
func retryAfterSeconds(details map[string]any) int {
	var secs float64
	switch v := details["retryAfterSeconds"].(type) {
	case int:
		secs = float64(v)
	case int64:
		secs = float64(v)
	case int32:
		secs = float64(v)
	case float64:
		secs = v
	case json.Number:
		secs, _ = v.Float64()
	}
	if math.IsNaN(secs) || secs < 1 {
		return 1
	}
	if secs > math.MaxInt32 {
		return math.MaxInt32
	}
	return int(math.Ceil(secs))
}

// appendErrorBody appends to dst the JSON of body with details.requestId
// set to rid (when not ""), byte for byte what json.Marshal gives for
// withRequestID(body, rid): keys of details sorted, strings escaped as
// encoding/json escapes them (HTML characters, U+2028, U+2029 and invalid
// UTF-8 included). String and nil detail values are written directly,
// any other value by json.Marshal; it panics, as writeJSON does, on a
// value that does not marshal (only our own types are written).
func appendErrorBody(dst []byte, body errorBody, rid string) []byte {
	dst = append(dst, `{"error":`...)
	dst = appendJSONString(dst, body.Error)
	dst = append(dst, `,"code":`...)
	dst = appendJSONString(dst, body.Code)
	if body.Details == nil && rid == "" {
		return append(dst, `,"details":null}`...)
	}
	dst = append(dst, `,"details":{`...)
	keys := make([]string, 0, len(body.Details)+1)
	for k := range body.Details {
		if rid == "" || k != "requestId" {
			keys = append(keys, k)
		}
	}
	if rid != "" {
		keys = append(keys, "requestId")
	}
	slices.Sort(keys)
	for i, k := range keys {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = appendJSONString(dst, k)
		dst = append(dst, ':')
		var v any = rid
		if rid == "" || k != "requestId" {
			v = body.Details[k]
		}
		switch v := v.(type) {
		case nil:
			dst = append(dst, "null"...)
		case string:
			dst = appendJSONString(dst, v)
		default:
			b, err := json.Marshal(v)
			if err != nil {
				panic(fmt.Sprintf("httpapi: marshal error details %q (%T): %v", k, v, err))
			}
			dst = append(dst, b...)
		}
	}
	return append(dst, "}}"...)
}

// appendJSONString appends s as a JSON string, escaped as encoding/json
// escapes it by default: ", \ and control characters; <, > and & as
// \u003c, \u003e and \u0026; U+2028 and U+2029; each invalid UTF-8 byte as
// \ufffd.
func appendJSONString(dst []byte, s string) []byte {
	const hex = "0123456789abcdef"
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); {
		if b := s[i]; b < utf8.RuneSelf {
			if b >= 0x20 && b != '"' && b != '\\' && b != '<' && b != '>' && b != '&' {
				i++
				continue
			}
			dst = append(dst, s[start:i]...)
			switch b {
			case '"', '\\':
				dst = append(dst, '\\', b)
			case '\n':
				dst = append(dst, '\\', 'n')
			case '\r':
				dst = append(dst, '\\', 'r')
			case '\t':
				dst = append(dst, '\\', 't')
			case '\b':
				dst = append(dst, '\\', 'b')
			case '\f':
				dst = append(dst, '\\', 'f')
			default:
				dst = append(dst, '\\', 'u', '0', '0', hex[b>>4], hex[b&0xf])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			dst = append(dst, s[start:i]...)
			dst = append(dst, `\ufffd`...)
			i += size
			start = i
			continue
		}
		if r == '\u2028' || r == '\u2029' {
			dst = append(dst, s[start:i]...)
			dst = append(dst, '\\', 'u', '2', '0', '2', hex[r&0xf])
			i += size
			start = i
			continue
		}
		i += size
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}

// clientGone reports whether err is only the end of r's own context: the
// client closed the connection (context.Canceled) or its deadline passed
// (context.DeadlineExceeded) while the request was served. An error of a
// deadline the server set itself, with r's context still live, is not.
func clientGone(r *http.Request, err error) bool {
	return r.Context().Err() != nil && (errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded))
}

// withRequestID returns body with details.requestId set to rid (a copy:
// the details of an error value are never changed); body as is for rid "".
func withRequestID(body errorBody, rid string) errorBody {
	if rid == "" {
		return body
	}
	d := make(map[string]any, len(body.Details)+1)
	for k, v := range body.Details {
		d[k] = v
	}
	d["requestId"] = rid
	body.Details = d
	return body
}
