package mcp

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/clasp-dev/clasp"
	"github.com/clasp-dev/clasp/client"
)

// fail fills env with the answer to err, a failure of a call about issue
// ref ("" for none), and returns it. Every such answer is sent with
// isError set. The sentence says what to do and whether to retry:
//
//   - missing setting: not_configured, naming it (never retryable);
//   - 409 checkout_conflict: conflict, with the holder (agent, run, since);
//   - 409 ownership_conflict: ownership_lost, stop working on the issue;
//   - 409 run_not_live (errRunLost): run_lost, the released issues, a new
//     run opened, nothing retried;
//   - 400 for an issue argument that is no issue reference: error.field
//     "issue";
//   - 401, 403, 404, 400/422, 429/503, no answer: one sentence each.
func (s *Session) fail(ctx context.Context, env *Envelope, ref string, err error) {
	issue := ref
	if issue == "" {
		issue = "the issue"
	}
	var nc *errNotConfigured
	var lost *errRunLost
	switch {
	case errors.As(err, &nc):
		env.Outcome = OutcomeNotConfigured
		env.Message = nc.sentence
		env.Error = &ErrorInfo{Code: OutcomeNotConfigured, Setting: nc.setting}
		return
	case errors.As(err, &lost):
		env.Outcome = OutcomeRunLost
		env.ReleasedIssues = lost.released
		held := "It held no issue."
		switch len(lost.released) {
		case 0:
		case 1:
			held = "The issue it held was released (" + lost.released[0] + "): stop working on it; another agent may take it."
		default:
			held = "Every issue it held was released (" + strings.Join(lost.released, ", ") + "): stop working on them; another agent may take them."
		}
		next := "Nothing was written. Call claim_next_issue (or checkout_issue) to take work again in the new run."
		switch {
		case s.cfg.LauncherRun():
			next = "Nothing was written. The run was given by the launcher, so this session cannot open another: stop and end the session."
		case lost.reopened == "":
			next = "Nothing was written. A new run could not be opened yet; call claim_next_issue to try again."
		}
		env.Message = fmt.Sprintf("This session's run %s ended (its lease ran out or it was cancelled). %s %s", short(lost.runID), held, next)
		env.Error = &ErrorInfo{Code: clasp.CodeRunNotLive, Status: http.StatusConflict, Server: errMessage(lost.cause)}
		return
	case errors.Is(err, errNoRun):
		env.Outcome = OutcomeError
		env.Message = "This MCP endpoint is stateless and the request names no run: send a run token as the bearer (POST /api/agents/me/runs opens a run and returns one), or the agent API key with the run's id in X-Clasp-Run-Id. Retrying as is fails again."
		env.Error = &ErrorInfo{Code: clasp.CodeRunIDRequired, Status: http.StatusUnauthorized}
		return
	}
	e := clasp.AsError(err)
	if e == nil {
		env.Outcome = OutcomeError
		if client.IsConnectionError(err) || errors.Is(err, context.DeadlineExceeded) {
			env.Message = fmt.Sprintf("The clasp server at %s did not answer (%v). Retry in a few seconds; if it keeps failing, tell the human the clasp server is down. A write may or may not have been applied: check with get_issue before redoing it.", s.cfg.URL, err)
			env.Error = &ErrorInfo{Code: "unreachable", Retryable: true, Server: err.Error()}
			return
		}
		env.Message = fmt.Sprintf("The call failed: %v. Retry once; if it fails again, tell the human.", err)
		env.Error = &ErrorInfo{Code: clasp.CodeInternal, Retryable: true, Server: err.Error()}
		return
	}
	env.Error = &ErrorInfo{Code: e.Code, Status: e.Status, Server: e.Message}
	env.Outcome = OutcomeError
	switch e.Code {
	case clasp.CodeCheckoutConflict:
		env.Outcome = OutcomeConflict
		env.Reason, _ = e.Details["reason"].(string)
		env.Message = s.conflictSentence(ctx, env, issue, e)
	case clasp.CodeOwnershipConflict:
		env.Outcome = OutcomeOwnershipLost
		env.Message = fmt.Sprintf("Stop working on %s: this session's run does not hold it (another run took it over, or it was released). Nothing was written; do not write results for it. Call claim_next_issue for other work.", issue)
	case clasp.CodeUnauthenticated:
		env.Message = "The clasp server refused the credential (401): the API key in " + EnvAPIKey + " is wrong or revoked, its agent was terminated, or its run ended. Do not retry; ask the human to set a valid key and restart this MCP server."
		if s.cfg.HTTP {
			env.Message = "The clasp server refused the credential (401): the bearer token this MCP client sends to /mcp (its Authorization header) is wrong or revoked, its agent was terminated, or its run ended. Do not retry; ask the human to put a valid agent API key (or run token) in the headers of this MCP server in the MCP client's configuration."
		}
	case clasp.CodeRunIDRequired:
		env.Message = "The clasp server wants a run for this call (401 run_id_required). Retry once; if it fails again, tell the human."
		env.Error.Retryable = true
	case clasp.CodeForbidden, clasp.CodeAgentMismatch, clasp.CodeRunNotOwned:
		env.Message = fmt.Sprintf("The clasp server does not let this agent do that (%d %s): %s Do not retry.", e.Status, e.Code, e.Message)
	case clasp.CodeNotFound:
		what := "The issue was not found"
		if ref != "" {
			// Quoted: the argument may be any text ("not an issue").
			what = fmt.Sprintf("Issue %q was not found", ref)
		}
		env.Message = what + " (404): there is no such issue in this agent's company. Check the identifier (e.g. with list_my_issues); retrying as is fails again."
	case clasp.CodeInvalidRequest, clasp.CodePreconditionFailed, clasp.CodeIdempotencyKeyReused, clasp.CodeRunNotFound, clasp.CodeBodyTooLarge:
		if f, _ := e.Details["field"].(string); e.Code == clasp.CodeInvalidRequest && f == "id" && ref != "" {
			// The server refused the issue route's path id: the issue
			// argument has neither an identifier's nor a UUID's shape.
			env.Error.Field = "issue"
			env.Message = fmt.Sprintf("%q is not an issue reference (400 invalid_request): give the issue's identifier (e.g. ACME-12) or UUID. Check it (e.g. with list_my_issues); retrying as is fails again.", ref)
			return
		}
		env.Message = fmt.Sprintf("The clasp server refused the request (%d %s): %s Fix the arguments; retrying as is fails again.", e.Status, e.Code, e.Message)
	case clasp.CodeUnavailable, clasp.CodeRequestTimeout, clasp.CodeIdempotencyInFlight:
		env.Message = fmt.Sprintf("The clasp server is busy or unavailable (%d %s). Retry in a few seconds.", e.Status, e.Code)
		env.Error.Retryable = true
	default:
		if e.Status == http.StatusTooManyRequests {
			env.Message = fmt.Sprintf("The clasp server is rate limiting this agent (429). Wait a few seconds, then retry: %s", e.Message)
			env.Error.Retryable = true
			return
		}
		env.Message = fmt.Sprintf("The clasp server failed (%d %s): %s Retry once; if it fails again, tell the human.", e.Status, e.Code, e.Message)
		env.Error.Retryable = e.Status >= 500
	}
}

// conflictSentence describes a 409 checkout_conflict and fills env.HeldBy
// from the issue (its execution agent and lock time) and the holding run.
func (s *Session) conflictSentence(ctx context.Context, env *Envelope, issue string, e *clasp.Error) string {
	h := &Holder{}
	if id, ok := e.Details["checkoutRunId"].(string); ok {
		h.RunID = id
	}
	if h.RunID == "" {
		if id, ok := e.Details["executionRunId"].(string); ok {
			h.RunID = id
		}
	}
	c, _ := s.client()
	if c != nil {
		lctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		if id, _ := e.Details["issueId"].(string); id != "" {
			if iss, err := c.IssueGet(lctx, id); err == nil {
				if iss.ExecutionAgentNameKey != nil {
					h.Agent = *iss.ExecutionAgentNameKey
				}
				h.Since = iss.ExecutionLockedAt
				if h.RunID == "" && iss.CheckoutRunID != nil {
					h.RunID = *iss.CheckoutRunID
				}
			}
		}
		if h.RunID != "" {
			if r, err := c.RunGet(lctx, h.RunID); err == nil {
				h.Live = r.Live(time.Now())
			}
		}
	}
	s.mu.Lock()
	h.ThisRun = s.run != nil && s.run.ID == h.RunID
	s.mu.Unlock()
	if h.RunID != "" {
		env.HeldBy = h
	}
	switch env.Reason {
	case clasp.ReasonStatusNotExpected:
		st, _ := e.Details["status"].(string)
		return fmt.Sprintf("%s cannot be checked out: its status is %s. Do not work on it; call claim_next_issue for other work.", issue, st)
	case clasp.ReasonAssignedToOtherAgent:
		return fmt.Sprintf("%s is assigned to another agent. Do not work on it; call claim_next_issue for other work.", issue)
	}
	who := "agent " + h.Agent
	if h.Agent == "" {
		who = "another agent"
	}
	state := "live run " + short(h.RunID)
	if !h.Live {
		state = "run " + short(h.RunID) + ", whose lease has not been swept yet"
	}
	return fmt.Sprintf("%s is held by %s (%s). Do not work on it; call claim_next_issue for other work.", issue, who, state)
}

// short returns the first 8 characters of a UUID.
func short(id string) string {
	if len(id) > 8 {
		return id[:8]
	}
	return id
}

func errMessage(err error) string {
	if err == nil {
		return ""
	}
	if e := clasp.AsError(err); e != nil {
		return e.Message
	}
	return err.Error()
}
