package client

import (
	"fmt"
	"mime"
	"net/http"
	"strings"
	"unicode/utf8"

	"github.com/clasp-dev/clasp"
)

// NotClaspError is returned when an answer is not one a clasp server gives:
// a success whose body is not JSON, or an error status without clasp's JSON
// error body (an HTML page of another web server, a proxy's plain-text
// error). It usually means the client's base URL points at something that
// is not a clasp server.
//
// For an error status, Unwrap returns a *clasp.Error with code internal and
// Status set (so clasp.AsError and IsConflict still see the status); for a
// success it returns nil.
type NotClaspError struct {
	Method, URL string
	Status      int    // the HTTP status answered
	ContentType string // the answer's media type, "" when none was sent
	// Text is the start of a short plain-text body (at most 200
	// characters); "" for HTML and other bodies, which are never quoted.
	Text string
	err  *clasp.Error
}

// Error says what answered and that it is not a clasp server, in one
// sentence: "GET http://h/api/issues/X answered 404 Not Found with
// text/html, not clasp's JSON: that is not a clasp server (or something in
// front of it answered)".
func (e *NotClaspError) Error() string {
	what := "no body type"
	if e.ContentType != "" {
		what = e.ContentType
	}
	msg := fmt.Sprintf("%s %s answered %d %s with %s, not clasp's JSON: that is not a clasp server (or something in front of it answered)",
		e.Method, e.URL, e.Status, http.StatusText(e.Status), what)
	if e.Text != "" {
		msg += fmt.Sprintf("; it said %q", e.Text)
	}
	return msg
}

// Unwrap returns the *clasp.Error of an error status (code internal), or nil.
func (e *NotClaspError) Unwrap() error {
	if e.err == nil {
		return nil
	}
	return e.err
}

// notClasp builds the NotClaspError for resp, whose body starts with raw.
func notClasp(resp *http.Response, raw []byte) *NotClaspError {
	mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	e := &NotClaspError{Status: resp.StatusCode, ContentType: mt}
	if resp.Request != nil {
		e.Method, e.URL = resp.Request.Method, resp.Request.URL.String()
	}
	if s := strings.TrimSpace(string(raw)); (mt == "" || mt == "text/plain") && s != "" && utf8.ValidString(s) && !strings.HasPrefix(s, "<") {
		if len(s) > 200 {
			s = s[:200] + "..."
		}
		e.Text = s
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		e.err = &clasp.Error{Code: clasp.CodeInternal, Message: statusMessage(resp.StatusCode, []byte(e.Text)), Details: map[string]any{}, Status: resp.StatusCode}
	}
	return e
}
