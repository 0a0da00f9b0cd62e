package mcp

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/clasp-dev/clasp"
)

// TestFailSentences pins the answer to each server refusal the end-to-end
// tests cannot provoke on demand (403, 422, 429, 503, 500, run_id_required,
// an error that is no server answer): an outcome, the code and status, a
// sentence saying whether to retry, and the retryable flag.
func TestFailSentences(t *testing.T) {
	s := NewSession(Config{URL: "http://127.0.0.1:1", Token: "clasp_ak_x"}, Options{})
	for _, tc := range []struct {
		err       error
		code      string
		retryable bool
		says      string
	}{
		{&clasp.Error{Code: clasp.CodeForbidden, Status: 403, Message: "Agents may not do that."}, clasp.CodeForbidden, false, "Do not retry"},
		{&clasp.Error{Code: clasp.CodePreconditionFailed, Status: 422, Message: "Closed."}, clasp.CodePreconditionFailed, false, "retrying as is fails again"},
		{&clasp.Error{Code: clasp.CodeInvalidRequest, Status: 400, Message: "Bad body."}, clasp.CodeInvalidRequest, false, "Fix the arguments"},
		{&clasp.Error{Code: "rate_limited", Status: 429, Message: "Slow down."}, "rate_limited", true, "Wait a few seconds"},
		{&clasp.Error{Code: clasp.CodeUnavailable, Status: 503, Message: "Stopping."}, clasp.CodeUnavailable, true, "Retry in a few seconds"},
		{&clasp.Error{Code: clasp.CodeInternal, Status: 500, Message: "Bug."}, clasp.CodeInternal, true, "Retry once"},
		{&clasp.Error{Code: clasp.CodeRunIDRequired, Status: 401, Message: "No run."}, clasp.CodeRunIDRequired, true, "Retry once"},
		{errors.New("decode: unexpected EOF"), clasp.CodeInternal, true, "Retry once"},
		{errNoRun, clasp.CodeRunIDRequired, false, "X-Clasp-Run-Id"},
	} {
		env := &Envelope{}
		s.fail(context.Background(), env, "ACME-1", tc.err)
		if env.Outcome != OutcomeError || env.Error == nil || env.Error.Code != tc.code || env.Error.Retryable != tc.retryable || !strings.Contains(env.Message, tc.says) {
			t.Errorf("%v: outcome %q error %+v message %q; want code %s retryable %v saying %q", tc.err, env.Outcome, env.Error, env.Message, tc.code, tc.retryable, tc.says)
		}
	}
}

// TestRunLostSentence: the run_lost sentence reads right for no, one and
// several released issues, and ReleasedIssues lists them as they are.
func TestRunLostSentence(t *testing.T) {
	s := NewSession(Config{URL: "http://127.0.0.1:1", Token: "clasp_ak_x"}, Options{})
	for _, tc := range []struct {
		released []string
		says     string
	}{
		{nil, "It held no issue."},
		{[]string{"ACME-3"}, "The issue it held was released (ACME-3): stop working on it; another agent may take it."},
		{[]string{"ACME-3", "ACME-4"}, "Every issue it held was released (ACME-3, ACME-4): stop working on them; another agent may take them."},
	} {
		env := &Envelope{}
		s.fail(context.Background(), env, "", &errRunLost{runID: "01a23557-6438-75fc-8bb7-1d3dd328d8df", released: tc.released, cause: errors.New("run not live")})
		if env.Outcome != OutcomeRunLost || len(env.ReleasedIssues) != len(tc.released) || !strings.Contains(env.Message, tc.says) {
			t.Errorf("released %v: outcome %q released %v message %q; want run_lost saying %q", tc.released, env.Outcome, env.ReleasedIssues, env.Message, tc.says)
		}
	}
}
