package httpapi

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/clasp-dev/clasp"
)

// DefaultMaxBodyBytes caps request bodies (1 MiB); more answers 413
// body_too_large.
const DefaultMaxBodyBytes int64 = 1 << 20

// maxJSONDepth bounds the nesting of request bodies. No request body of the
// API nests deeper than 2; the bound keeps the key checks cheap.
const maxJSONDepth = 32

// readBody reads all of r. r should be an http.MaxBytesReader: its limit
// error answers 413 body_too_large. A read that hits the connection's read
// deadline (Server.readRequestBody) answers 408 request_timeout. Any other
// read error is 400 invalid_request (the client sent a broken body).
func readBody(r io.Reader) ([]byte, error) {
	data, err := io.ReadAll(r)
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return nil, clasp.Errorf(clasp.CodeBodyTooLarge, "The request body is larger than %d bytes.", mbe.Limit).
				WithDetails("limit", mbe.Limit)
		}
		var ne net.Error
		if errors.Is(err, os.ErrDeadlineExceeded) || errors.As(err, &ne) && ne.Timeout() {
			return nil, clasp.Errorf(clasp.CodeRequestTimeout, "The request body did not arrive in time; send the whole body at once.")
		}
		return nil, clasp.Errorf(clasp.CodeInvalidRequest, "The request body could not be read.")
	}
	return data, nil
}

// utf8BOM is the UTF-8 byte order mark, which some editors and Windows
// tools put before a text.
var utf8BOM = []byte("\xef\xbb\xbf")

// decodeJSON reads a JSON object from r (capped by the caller with
// http.MaxBytesReader) into v, a pointer to a struct whose fields carry json
// tags. It is the only place request bodies are decoded (scenario
// S26) and rejects, with 400 invalid_request:
//   - bodies that start with a UTF-8 byte order mark (said so), that are
//     not valid UTF-8 (a string escape of a lone UTF-16 surrogate, which
//     encoding/json would store as U+FFFD, included), not valid JSON, not an object, or followed by
//     anything but white space;
//   - duplicate keys, and keys that differ only in case, in any object
//     (encoding/json would silently let the last one win);
//   - top-level keys that are not exactly (case-sensitively) a json tag of v
//     ("unknown field"), with details.field naming the key;
//   - values of the wrong type, with details.field naming the field.
//
// A body over the cap answers 413 body_too_large. Every error is a
// *clasp.Error; decodeJSON never panics on any input.
func decodeJSON(r io.Reader, v any) error {
	data, err := readBody(r)
	if err != nil {
		return err
	}
	return decodeJSONBytes(data, v)
}

// decodeJSONBytes is decodeJSON on a body already read.
func decodeJSONBytes(data []byte, v any) error {
	if string(data) == "{}" {
		// The empty object (a release, and every empty body) sets no
		// field and passes every check: v stays as it is, and the two
		// JSON decoders below are spared.
		return nil
	}
	if bytes.HasPrefix(data, utf8BOM) {
		return clasp.Errorf(clasp.CodeInvalidRequest, "The request body starts with a byte order mark (EF BB BF); send the JSON without it (RFC 8259 forbids adding one).")
	}
	if !utf8.Valid(data) || hasLoneSurrogateEscape(data) {
		return clasp.Errorf(clasp.CodeInvalidRequest, "The request body is not valid UTF-8 text.")
	}
	keys, err := checkJSONStructure(data)
	if err != nil {
		return err
	}
	known := jsonFieldNames(reflect.TypeOf(v))
	ro, _ := v.(readOnlyFielder)
	cf, _ := v.(compatFielder)
	var compat []string
	for _, k := range keys {
		if _, ok := known[k]; ok {
			continue
		}
		if ro != nil && ro.readOnlyField(k) {
			return clasp.InvalidField(k, "Field %q is read-only: lock columns and server-kept fields are never writable.", k)
		}
		if cf != nil {
			if _, ok := cf.compatFields()[k]; ok {
				compat = append(compat, k)
				continue
			}
		}
		return clasp.InvalidField(k, "Unknown field %q in the request body.", k)
	}
	if nn, ok := v.(nonNullFielder); ok {
		if err := checkNonNull(data, keys, nn); err != nil {
			return err
		}
	}
	if len(compat) > 0 {
		if err := checkCompatFields(data, cf.compatFields(), compat); err != nil {
			return err
		}
		if n, ok := v.(compatNoter); ok {
			n.noteCompat(compat)
		}
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	if len(compat) == 0 {
		// Every key was checked above; with Paperclip fields present the
		// decoder must skip them (they have no struct field).
		dec.DisallowUnknownFields()
	}
	if err := dec.Decode(v); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) {
			f := te.Field
			if i := strings.IndexByte(f, '.'); i >= 0 {
				f = f[:i]
			}
			return clasp.InvalidField(f, "Field %q must be %s, not a JSON %s.", f, typeName(te.Type), te.Value)
		}
		// Structure and keys were checked above, so this is rare: e.g. a
		// value a custom decoder refused.
		return clasp.Errorf(clasp.CodeInvalidRequest, "The request body is not a valid JSON object: %s.", trimJSONErr(err))
	}
	return nil
}

// nonNullFielder is implemented by request bodies with optional fields
// that have no null: leaving such a field out keeps the value, so a null
// would otherwise be read as "absent" and silently change nothing.
// nonNullField returns what the field takes (e.g. "a non-empty string")
// and true for such a field.
type nonNullFielder interface {
	nonNullField(name string) (takes string, ok bool)
}

// checkNonNull answers 400 invalid_request naming the first top-level key
// of data (an object already checked by checkJSONStructure) whose value is
// null while nn says the field has no null.
func checkNonNull(data []byte, keys []string, nn nonNullFielder) error {
	var fields []string
	for _, k := range keys {
		if _, ok := nn.nonNullField(k); ok {
			fields = append(fields, k)
		}
	}
	if len(fields) == 0 {
		return nil
	}
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(data, &raw); err != nil {
		return nil // the decoder below reports it
	}
	for _, k := range fields {
		if string(raw[k]) == "null" {
			takes, _ := nn.nonNullField(k)
			return clasp.InvalidField(k, "Field %q cannot be null: send %s, or leave the field out to keep it as it is.", k, takes)
		}
	}
	return nil
}

// readOnlyFielder is implemented by request bodies whose resource has
// fields a client may read but never write (RULES.md, Errors and requests: lock columns);
// decodeJSON names them as read-only rather than unknown (scenario S18).
type readOnlyFielder interface {
	readOnlyField(name string) bool
}

// checkJSONStructure validates data as exactly one JSON object followed only
// by white space, with no duplicate (or case-folded duplicate) keys in any
// object, at most maxJSONDepth deep. It returns the top-level keys in order.
func checkJSONStructure(data []byte) ([]string, error) {
	if top, ok := plainObjectKeys(data); ok {
		return top, nil
	}
	return checkJSONTokens(data)
}

// plainObjectKeys is checkJSONStructure's fast path for the bodies clients
// send: it returns data's top-level keys and true when data is one valid
// JSON object, at most maxJSONDepth deep, whose keys (at every depth) are
// ASCII without escapes and distinct within each object regardless of
// case. For anything else it returns false, and checkJSONTokens decides
// and words the error, so both paths answer alike.
func plainObjectKeys(data []byte) ([]string, bool) {
	if !json.Valid(data) {
		return nil, false
	}
	type frame struct {
		object    bool
		expectKey bool
		keys      int // index in keys where this object's keys start
	}
	var (
		stackBuf [maxJSONDepth]frame
		stack    = stackBuf[:0]
		keysBuf  [16]string
		keys     = keysBuf[:0]
		top      []string
	)
	i := skipSpace(data, 0)
	if i >= len(data) || data[i] != '{' {
		return nil, false
	}
	for i < len(data) {
		switch c := data[i]; c {
		case '{', '[':
			if len(stack) >= maxJSONDepth {
				return nil, false
			}
			stack = append(stack, frame{object: c == '{', expectKey: c == '{', keys: len(keys)})
			i++
		case '}', ']':
			f := stack[len(stack)-1]
			stack = stack[:len(stack)-1]
			if f.object {
				keys = keys[:f.keys]
			}
			i++
			if len(stack) == 0 {
				// json.Valid allows only white space after the object.
				return top, true
			}
		case ',':
			if f := &stack[len(stack)-1]; f.object {
				f.expectKey = true
			}
			i++
		case ':', ' ', '\t', '\n', '\r':
			i++
		case '"':
			end := stringEnd(data, i)
			if f := &stack[len(stack)-1]; f.object && f.expectKey {
				key := data[i+1 : end-1]
				for _, b := range key {
					if b == '\\' || b >= utf8.RuneSelf {
						return nil, false
					}
				}
				for _, k := range keys[f.keys:] {
					if strings.EqualFold(k, string(key)) {
						return nil, false
					}
				}
				ks := string(key)
				keys = append(keys, ks)
				if len(stack) == 1 {
					top = append(top, ks)
				}
				f.expectKey = false
			}
			i = end
		default: // a number, true, false or null
			for i < len(data) && !endsScalar(data[i]) {
				i++
			}
		}
	}
	return nil, false // unreachable for valid JSON
}

// hasLoneSurrogateEscape reports whether a JSON string in data holds a \u
// escape of a UTF-16 surrogate that is not one half of a pair: a high
// surrogate (\uD800-\uDBFF) not followed at once by a low one
// (\uDC00-\uDFFF), or a low one not preceded by a high one. Such text
// names no character, so it is not UTF-8. Only escapes inside strings
// count: an escaped backslash (\\) is skipped whole, so \\uD800 is a
// backslash and the text uD800. data need not be valid JSON; the scan then
// answers for the strings as far as they can be told apart.
func hasLoneSurrogateEscape(data []byte) bool {
	if bytes.IndexByte(data, '\\') < 0 {
		return false
	}
	inString := false
	for i := 0; i < len(data); i++ {
		switch c := data[i]; {
		case !inString:
			inString = c == '"'
		case c == '"':
			inString = false
		case c == '\\' && i+1 < len(data):
			if data[i+1] != 'u' {
				i++ // \\, \" and the other one-letter escapes
				continue
			}
			r, ok := hexEscape(data, i)
			if !ok {
				i++
				continue
			}
			i += 5 // the last byte of \uXXXX
			switch {
			case r >= 0xDC00 && r <= 0xDFFF:
				return true
			case r >= 0xD800 && r <= 0xDBFF:
				lo, ok := hexEscape(data, i+1)
				if !ok || lo < 0xDC00 || lo > 0xDFFF {
					return true
				}
				i += 6
			}
		}
	}
	return false
}

// hexEscape returns the code unit of the \uXXXX escape at data[i:], and
// false when data[i:] does not start with one.
func hexEscape(data []byte, i int) (rune, bool) {
	if i+6 > len(data) || data[i] != '\\' || data[i+1] != 'u' {
		return 0, false
	}
	var r rune
	for _, c := range data[i+2 : i+6] {
		switch {
		case c >= '0' && c <= '9':
			r = r<<4 | rune(c-'0')
		case c >= 'a' && c <= 'f':
			r = r<<4 | rune(c-'a'+10)
		case c >= 'A' && c <= 'F':
			r = r<<4 | rune(c-'A'+10)
		default:
			return 0, false
		}
	}
	return r, true
}

// skipSpace returns the index of the first byte of data at or after i that
// is not JSON white space.
func skipSpace(data []byte, i int) int {
	for i < len(data) && (data[i] == ' ' || data[i] == '\t' || data[i] == '\n' || data[i] == '\r') {
		i++
	}
	return i
}

// endsScalar reports whether b ends a JSON number or literal.
func endsScalar(b byte) bool {
	switch b {
	case ',', ']', '}', ' ', '\t', '\n', '\r':
		return true
	}
	return false
}

// stringEnd returns the index just past the closing quote of the JSON
// string that opens at data[i] (data is valid JSON).
func stringEnd(data []byte, i int) int {
	for j := i + 1; j < len(data); j++ {
		switch data[j] {
		case '\\':
			j++
		case '"':
			return j + 1
		}
	}
	return len(data)
}

// checkJSONTokens is checkJSONStructure through encoding/json's tokens: it
// decides every body, and words every error.
func checkJSONTokens(data []byte) ([]string, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber() // numbers such as 1e999 are syntax, not a float64 to parse
	syntaxErr := func(err error) error {
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			return clasp.Errorf(clasp.CodeInvalidRequest, "The request body is not valid JSON: it ends too early.")
		}
		return clasp.Errorf(clasp.CodeInvalidRequest, "The request body is not valid JSON: %s.", trimJSONErr(err))
	}
	tok, err := dec.Token()
	if err != nil {
		if errors.Is(err, io.EOF) {
			return nil, clasp.Errorf(clasp.CodeInvalidRequest, "The request body is empty; send a JSON object.")
		}
		return nil, syntaxErr(err)
	}
	if d, ok := tok.(json.Delim); !ok || d != '{' {
		return nil, clasp.Errorf(clasp.CodeInvalidRequest, "The request body must be a JSON object.")
	}
	// One frame per open object or array. For an object, seen holds its
	// folded keys so far and expectKey says whether the next token is a key
	// (or its closing brace).
	type frame struct {
		object    bool
		expectKey bool
		seen      map[string]struct{}
		path      string // dotted name of this value, for error details
	}
	stack := []frame{{object: true, expectKey: true, seen: map[string]struct{}{}}}
	var top []string
	lastKey := "" // dotted name of the value being read
	valueDone := func() {
		if n := len(stack); n > 0 && stack[n-1].object {
			stack[n-1].expectKey = true
		}
	}
	for len(stack) > 0 {
		tok, err := dec.Token()
		if err != nil {
			return nil, syntaxErr(err)
		}
		f := &stack[len(stack)-1]
		if f.object && f.expectKey {
			if tok == json.Delim('}') {
				stack = stack[:len(stack)-1]
				valueDone()
				continue
			}
			key, ok := tok.(string)
			if !ok { // the decoder's own syntax check makes this unreachable
				return nil, clasp.Errorf(clasp.CodeInvalidRequest, "The request body is not valid JSON.")
			}
			name := key
			if f.path != "" {
				name = f.path + "." + key
			}
			fk := foldKey(key)
			if _, dup := f.seen[fk]; dup {
				return nil, clasp.InvalidField(name, "Field %q appears more than once (keys are compared without regard to case).", name)
			}
			f.seen[fk] = struct{}{}
			if len(stack) == 1 {
				top = append(top, key)
			}
			f.expectKey = false
			lastKey = name
			continue
		}
		switch tok {
		case json.Delim('{'), json.Delim('['):
			if len(stack) >= maxJSONDepth {
				return nil, clasp.Errorf(clasp.CodeInvalidRequest, "The request body nests deeper than %d levels.", maxJSONDepth)
			}
			nf := frame{object: tok == json.Delim('{'), expectKey: true, path: lastKey}
			if nf.object {
				nf.seen = map[string]struct{}{}
			}
			stack = append(stack, nf)
		case json.Delim('}'), json.Delim(']'):
			stack = stack[:len(stack)-1]
			valueDone()
		default:
			valueDone()
		}
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, clasp.Errorf(clasp.CodeInvalidRequest, "The request body has data after the JSON object.")
	}
	return top, nil
}

// foldKey returns a canonical form of s under Unicode simple case folding,
// so that foldKey(a) == foldKey(b) exactly when strings.EqualFold(a, b),
// which is how encoding/json matches keys to fields.
func foldKey(s string) string {
	var b strings.Builder
	b.Grow(len(s))
	for _, r := range s {
		min := r
		for f := unicode.SimpleFold(r); f != r; f = unicode.SimpleFold(f) {
			if f < min {
				min = f
			}
		}
		b.WriteRune(min)
	}
	return b.String()
}

// fieldNames caches jsonFieldNames per type: request types are fixed at
// build time, so the cache holds one entry per request type and never
// changes an entry.
var fieldNames sync.Map // reflect.Type → map[string]struct{}

// jsonFieldNames returns the json names of the exported fields of the struct
// t points to (request types embed no structs), computed once per type.
// The map is shared: callers only read it.
func jsonFieldNames(t reflect.Type) map[string]struct{} {
	if m, ok := fieldNames.Load(t); ok {
		return m.(map[string]struct{})
	}
	m := fieldNamesOf(t)
	fieldNames.Store(t, m)
	return m
}

// fieldNamesOf is jsonFieldNames without the cache.
func fieldNamesOf(t reflect.Type) map[string]struct{} {
	m := map[string]struct{}{}
	for t != nil && t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t == nil || t.Kind() != reflect.Struct {
		return m
	}
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name == "-" {
			continue
		}
		if name == "" {
			name = f.Name
		}
		m[name] = struct{}{}
	}
	return m
}

// typeName names a Go type the way a JSON client thinks of it.
func typeName(t reflect.Type) string {
	if t == nil {
		return "a valid value"
	}
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "a boolean"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "an integer"
	case reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.Slice, reflect.Array:
		return "an array"
	case reflect.Map, reflect.Struct:
		return "an object"
	}
	return "a valid value"
}

// trimJSONErr returns err's text without encoding/json's "json: " prefix.
func trimJSONErr(err error) string {
	return strings.TrimPrefix(err.Error(), "json: ")
}

// answerBuffers are the buffers writeJSON encodes answers into, reused
// across requests (a buffer is back in the pool only after the answer was
// written, and buffers that grew past maxPooledAnswer are dropped).
var answerBuffers = sync.Pool{New: func() any { return new(bytes.Buffer) }}

// maxPooledAnswer is the largest buffer answerBuffers keeps (64 KiB), so
// that one long list answer does not pin its memory for good.
const maxPooledAnswer = 64 << 10

// writeJSON writes v as the JSON body of a response with the given status:
// the bytes json.Marshal gives, then a newline, in one Write. It panics if
// v does not marshal (only the package's own types are answered).
func writeJSON(w http.ResponseWriter, status int, v any) {
	buf := answerBuffers.Get().(*bytes.Buffer)
	buf.Reset()
	if iss, ok := v.(*clasp.Issue); ok && iss != nil && issueEncodable(iss) {
		// The answer of checkout, release and the other lock rules:
		// written directly, the same bytes as encoding/json's.
		buf.Write(append(appendIssueJSON(buf.AvailableBuffer(), iss), '\n'))
	} else if err := json.NewEncoder(buf).Encode(v); err != nil { // what Marshal returns (HTML-escaped alike) and a newline
		// Only our own types are marshalled; this is a bug.
		panic(fmt.Sprintf("httpapi: marshal %T: %v", v, err))
	}
	setJSONHeaders(w, status)
	_, _ = w.Write(buf.Bytes())
	if buf.Cap() <= maxPooledAnswer {
		answerBuffers.Put(buf)
	}
}

// The values of the headers every JSON answer carries, shared by all
// answers (net/http only reads them): setting them allocates nothing.
var (
	hdrJSON    = []string{"application/json"}
	hdrNosniff = []string{"nosniff"}
	hdrNoStore = []string{"no-store"}
)

// setJSONHeaders sets the headers of every JSON answer and writes the
// status line.
func setJSONHeaders(w http.ResponseWriter, status int) {
	h := w.Header()
	h["Content-Type"] = hdrJSON
	h["X-Content-Type-Options"] = hdrNosniff
	h["Cache-Control"] = hdrNoStore // answers may carry secrets (keys, run tokens)
	w.WriteHeader(status)
}

// issueEncodable reports whether appendIssueJSON writes iss as
// json.Marshal would: every time it holds is one that time.Time's
// MarshalJSON accepts (a year from 0 to 9999, a zone offset under 24 h).
func issueEncodable(iss *clasp.Issue) bool {
	for _, t := range [...]*time.Time{iss.ExecutionLockedAt, iss.StartedAt, iss.CompletedAt, iss.CancelledAt, &iss.CreatedAt, &iss.UpdatedAt} {
		if t == nil {
			continue
		}
		if y := t.Year(); y < 0 || y > 9999 {
			return false
		}
		if _, off := t.Zone(); off <= -24*3600 || off >= 24*3600 {
			return false
		}
	}
	return true
}

// appendIssueJSON appends iss as JSON, byte for byte what json.Marshal
// gives for it (fields in declaration order, strings escaped alike, nil
// pointers as null, times in RFC 3339 with nanoseconds), for an issue
// issueEncodable accepts.
func appendIssueJSON(dst []byte, iss *clasp.Issue) []byte {
	dst = append(dst, `{"id":`...)
	dst = appendJSONString(dst, iss.ID)
	dst = append(dst, `,"companyId":`...)
	dst = appendJSONString(dst, iss.CompanyID)
	dst = append(dst, `,"identifier":`...)
	dst = appendJSONString(dst, iss.Identifier)
	dst = append(dst, `,"title":`...)
	dst = appendJSONString(dst, iss.Title)
	dst = append(dst, `,"description":`...)
	dst = appendJSONString(dst, iss.Description)
	dst = append(dst, `,"status":`...)
	dst = appendJSONString(dst, string(iss.Status))
	dst = append(dst, `,"priority":`...)
	dst = appendJSONString(dst, string(iss.Priority))
	dst = append(dst, `,"assigneeAgentId":`...)
	dst = appendJSONStringPtr(dst, iss.AssigneeAgentID)
	dst = append(dst, `,"checkoutRunId":`...)
	dst = appendJSONStringPtr(dst, iss.CheckoutRunID)
	dst = append(dst, `,"checkoutEpoch":`...)
	dst = strconv.AppendInt(dst, iss.CheckoutEpoch, 10)
	dst = append(dst, `,"executionRunId":`...)
	dst = appendJSONStringPtr(dst, iss.ExecutionRunID)
	dst = append(dst, `,"executionAgentNameKey":`...)
	dst = appendJSONStringPtr(dst, iss.ExecutionAgentNameKey)
	dst = append(dst, `,"executionLockedAt":`...)
	dst = appendJSONTimePtr(dst, iss.ExecutionLockedAt)
	dst = append(dst, `,"startedAt":`...)
	dst = appendJSONTimePtr(dst, iss.StartedAt)
	dst = append(dst, `,"completedAt":`...)
	dst = appendJSONTimePtr(dst, iss.CompletedAt)
	dst = append(dst, `,"cancelledAt":`...)
	dst = appendJSONTimePtr(dst, iss.CancelledAt)
	dst = append(dst, `,"createdAt":`...)
	dst = appendJSONTime(dst, iss.CreatedAt)
	dst = append(dst, `,"updatedAt":`...)
	dst = appendJSONTime(dst, iss.UpdatedAt)
	dst = append(dst, `,"parentId":`...)
	dst = appendJSONStringPtr(dst, iss.ParentID)
	dst = append(dst, `,"unresolvedBlockerCount":`...)
	dst = strconv.AppendInt(dst, int64(iss.UnresolvedBlockerCount), 10)
	dst = append(dst, `,"dependencyReady":`...)
	dst = strconv.AppendBool(dst, iss.DependencyReady)
	dst = append(dst, `,"blockedBy":`...)
	dst = appendSummaries(dst, iss.BlockedBy)
	dst = append(dst, `,"blocks":`...)
	dst = appendSummaries(dst, iss.Blocks)
	dst = append(dst, `,"unresolvedBlockerIssueIds":`...)
	if iss.UnresolvedBlockerIssueIDs == nil {
		dst = append(dst, "null"...)
	} else {
		dst = append(dst, '[')
		for k, id := range iss.UnresolvedBlockerIssueIDs {
			if k > 0 {
				dst = append(dst, ',')
			}
			dst = appendJSONString(dst, id)
		}
		dst = append(dst, ']')
	}
	dst = append(dst, `,"completedEpoch":`...)
	if iss.CompletedEpoch == nil {
		dst = append(dst, "null"...)
	} else {
		dst = strconv.AppendInt(dst, *iss.CompletedEpoch, 10)
	}
	if w := iss.Workspace; w != nil {
		dst = append(dst, `,"workspace":{"branch":`...)
		dst = appendJSONString(dst, w.Branch)
		dst = append(dst, `,"stamp":`...)
		dst = appendJSONString(dst, w.Stamp)
		dst = append(dst, `,"epoch":`...)
		dst = strconv.AppendInt(dst, w.Epoch, 10)
		dst = append(dst, '}')
	}
	return append(dst, '}')
}

// appendSummaries appends issue summaries as encoding/json writes them
// (null for a nil slice).
func appendSummaries(dst []byte, ss []clasp.IssueSummary) []byte {
	if ss == nil {
		return append(dst, "null"...)
	}
	dst = append(dst, '[')
	for k, s := range ss {
		if k > 0 {
			dst = append(dst, ',')
		}
		dst = append(dst, `{"id":`...)
		dst = appendJSONString(dst, s.ID)
		dst = append(dst, `,"identifier":`...)
		dst = appendJSONString(dst, s.Identifier)
		dst = append(dst, `,"title":`...)
		dst = appendJSONString(dst, s.Title)
		dst = append(dst, `,"status":`...)
		dst = appendJSONString(dst, string(s.Status))
		dst = append(dst, '}')
	}
	return append(dst, ']')
}

// appendJSONStringPtr appends *s as a JSON string, or null for nil.
func appendJSONStringPtr(dst []byte, s *string) []byte {
	if s == nil {
		return append(dst, "null"...)
	}
	return appendJSONString(dst, *s)
}

// appendJSONTime appends t as time.Time's MarshalJSON writes it (for a
// time issueEncodable accepts).
func appendJSONTime(dst []byte, t time.Time) []byte {
	dst = append(dst, '"')
	dst = t.AppendFormat(dst, time.RFC3339Nano)
	return append(dst, '"')
}

// appendJSONTimePtr appends *t as appendJSONTime does, or null for nil.
func appendJSONTimePtr(dst []byte, t *time.Time) []byte {
	if t == nil {
		return append(dst, "null"...)
	}
	return appendJSONTime(dst, *t)
}
