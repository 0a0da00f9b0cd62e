package mcp

import (
	"fmt"
	"time"

	"github.com/clasp-dev/clasp"
)

// Outcomes of the tools (Envelope.Outcome). The first group are successes;
// the second are answered with isError set.
const (
	OutcomeOK            = "ok"             // session_status, list_my_issues, get_issue
	OutcomeClaimed       = "claimed"        // claim_next_issue took an issue
	OutcomeNoneAvailable = "none_available" // claim_next_issue: nothing to take now (not an error)
	OutcomeCheckedOut    = "checked_out"    // checkout_issue took the issue
	OutcomeAlreadyYours  = "already_yours"  // checkout_issue: this session's run holds it already (same epoch)
	OutcomeCommented     = "commented"      // add_comment
	OutcomeUpdated       = "updated"        // update_issue_status
	OutcomeCreated       = "created"        // create_issue
	OutcomeReleased      = "released"       // release_issue

	OutcomeConflict      = "conflict"       // 409 checkout_conflict: someone else holds it, or its status/assignee refuses
	OutcomeOwnershipLost = "ownership_lost" // 409 ownership_conflict: another run holds the issue now
	OutcomeRunLost       = "run_lost"       // 409 run_not_live: the session's run ended; its issues were released
	OutcomeNotConfigured = "not_configured" // a setting (CLASP_API_KEY, CLASP_URL) is missing
	OutcomeError         = "error"          // any other refusal or failure (error.code says which)
)

// Envelope is the part every tool answer shares. Outcome is one of the
// Outcome* constants; Message is one sentence for the model: what happened
// and what to do next. Error, HeldBy, Reason and ReleasedIssues are set on
// refusals.
type Envelope struct {
	Outcome string `json:"outcome" jsonschema:"what happened: ok, claimed, none_available, checked_out, already_yours, commented, updated, released, created; on errors (isError) conflict, ownership_lost, run_lost, not_configured or error"`
	Message string `json:"message" jsonschema:"one sentence: what happened and what to do next"`
	// Error describes a refusal or failure (isError results only).
	Error *ErrorInfo `json:"error,omitempty" jsonschema:"set on errors: the server's code, HTTP status and whether retrying can help"`
	// HeldBy is the holder of an issue a checkout could not take.
	HeldBy *Holder `json:"heldBy,omitempty" jsonschema:"on a conflict: who holds the issue"`
	// Reason is the checkout conflict's reason: held_by_live_run,
	// assigned_to_other_agent or status_not_expected.
	Reason string `json:"reason,omitempty" jsonschema:"on a conflict: held_by_live_run, assigned_to_other_agent or status_not_expected"`
	// ReleasedIssues are the issues a lost run held (run_lost).
	ReleasedIssues []string `json:"releasedIssues,omitempty" jsonschema:"on run_lost: the identifiers of the issues the ended run held, now released"`
}

func (e *Envelope) env() *Envelope { return e }

// ErrorInfo is the machine-readable side of an isError answer.
type ErrorInfo struct {
	Code      string `json:"code" jsonschema:"stable error code, e.g. checkout_conflict, ownership_conflict, run_not_live, unauthenticated, not_found, invalid_request, unreachable, not_configured"`
	Status    int    `json:"status,omitempty" jsonschema:"HTTP status of the clasp server's answer (0: no answer)"`
	Retryable bool   `json:"retryable" jsonschema:"true when the same call may succeed later as is"`
	Setting   string `json:"setting,omitempty" jsonschema:"the missing setting, e.g. CLASP_API_KEY"`
	Field     string `json:"field,omitempty" jsonschema:"the tool argument that is missing or does not fit the input schema (invalid_request)"`
	Server    string `json:"serverMessage,omitempty" jsonschema:"the clasp server's own message"`
}

// Holder is who holds an issue's lock.
type Holder struct {
	Agent   string     `json:"agent" jsonschema:"name (key) of the agent whose run holds the issue"`
	RunID   string     `json:"runId" jsonschema:"the holding run"`
	Since   *time.Time `json:"since,omitempty" jsonschema:"when that run took the issue"`
	Live    bool       `json:"live" jsonschema:"whether the holding run is still live (a dead holder's issue comes back once its lease runs out)"`
	ThisRun bool       `json:"thisSession" jsonschema:"true when the holder is this session's own run"`
}

// IssueView is an issue as the tools show it: human identifier first.
type IssueView struct {
	Identifier    string        `json:"identifier" jsonschema:"human identifier, e.g. ACME-12: use it in every call and message"`
	ID            string        `json:"id" jsonschema:"the issue's UUID"`
	Title         string        `json:"title"`
	Description   string        `json:"description,omitempty"`
	Status        string        `json:"status" jsonschema:"backlog, todo, in_progress, in_review, blocked, done or cancelled"`
	Priority      string        `json:"priority" jsonschema:"critical, high, medium or low"`
	Assignee      string        `json:"assignee,omitempty" jsonschema:"'you' when assigned to this agent, else the assignee's agent id"`
	HeldBy        *Holder       `json:"heldBy,omitempty" jsonschema:"the run holding the issue's lock, if any"`
	CheckoutEpoch int64         `json:"checkoutEpoch" jsonschema:"fencing token: raised at every new checkout"`
	Parent        string        `json:"parent,omitempty" jsonschema:"identifier of the issue this one is a part of"`
	BlockedBy     []DepView     `json:"blockedBy,omitempty" jsonschema:"issues that must be done before this one can be checked out or finished"`
	Blocks        []DepView     `json:"blocks,omitempty" jsonschema:"issues waiting for this one"`
	Ready         bool          `json:"dependencyReady" jsonschema:"true when every blocker is done: the issue may be checked out and finished"`
	WaitingOn     []string      `json:"waitingOn,omitempty" jsonschema:"identifiers of the blockers not done yet"`
	Comments      []CommentView `json:"recentComments,omitempty" jsonschema:"the latest comments, oldest first (get_issue)"`
}

// DepView is a blocker or dependent as the tools show it.
type DepView struct {
	Identifier string `json:"identifier"`
	Title      string `json:"title"`
	Status     string `json:"status"`
}

// CommentView is a comment as the tools show it.
type CommentView struct {
	ID        string    `json:"id"`
	Author    string    `json:"author" jsonschema:"'you', 'board', or the author's agent id"`
	Body      string    `json:"body"`
	CreatedAt time.Time `json:"createdAt"`
}

// stampOf returns the trailer of a checkout: "Clasp-Issue: ACME-12@7".
func stampOf(ident string, epoch int64) string {
	return fmt.Sprintf("Clasp-Issue: %s@%d", ident, epoch)
}

// Tool answers.

// StatusOut is session_status's answer.
type StatusOut struct {
	Envelope
	Configured     bool     `json:"configured" jsonschema:"whether CLASP_URL and CLASP_API_KEY are set"`
	Missing        string   `json:"missing,omitempty" jsonschema:"the missing setting, when not configured"`
	Server         string   `json:"server,omitempty" jsonschema:"the clasp server's URL"`
	Agent          string   `json:"agent,omitempty" jsonschema:"this session's agent name"`
	AgentID        string   `json:"agentId,omitempty"`
	RunID          string   `json:"runId,omitempty" jsonschema:"the run the tools act in ('' until the first call that needs one)"`
	RunOwner       string   `json:"runOwner" jsonschema:"session (opened lazily, finished when the session ends), launcher (given in CLASP_RUN_ID or a run token; never finished here) or request (HTTP)"`
	RunStatus      string   `json:"runStatus,omitempty"`
	LeaseExpiresAt string   `json:"leaseExpiresAt,omitempty"`
	Heartbeat      string   `json:"heartbeat" jsonschema:"beating, idle (stopped after the idle release time; the next call resumes it) or none"`
	Held           []string `json:"heldIssues" jsonschema:"identifiers of the issues this session's run holds"`
	IdleReleaseSec int64    `json:"idleReleaseSeconds" jsonschema:"the heartbeat stops after this many seconds without a tool call"`
}

// ListOut is list_my_issues's answer.
type ListOut struct {
	Envelope
	Issues []IssueSummary `json:"issues" jsonschema:"the agent's open assigned issues, most urgent first"`
}

// IssueSummary is one row of list_my_issues.
type IssueSummary struct {
	Identifier  string `json:"identifier"`
	ID          string `json:"id"`
	Title       string `json:"title"`
	Status      string `json:"status"`
	Priority    string `json:"priority"`
	HeldByYou   bool   `json:"heldByYou" jsonschema:"this session's run holds it: work on it"`
	HeldByOther string `json:"heldByRun,omitempty" jsonschema:"another live run holding it (e.g. a crashed session of yours until its lease runs out)"`
}

// IssueOut is the answer of the tools about one issue (claim_next_issue,
// get_issue, checkout_issue, update_issue_status, release_issue).
// Ownership is set when the answer grants the issue.
type IssueOut struct {
	Envelope
	Issue *IssueView `json:"issue,omitempty"`
	// Set when the answer grants the issue to this session's run.
	RunID             string `json:"runId,omitempty" jsonschema:"the run of this session that holds the issue"`
	CheckoutEpoch     int64  `json:"checkoutEpoch,omitempty" jsonschema:"fencing token of this checkout: stamp it on your work"`
	Stamp             string `json:"stamp,omitempty" jsonschema:"a trailer to add to each commit (or other output) of this work, e.g. Clasp-Issue: ACME-12@7"`
	Branch            string `json:"branch,omitempty" jsonschema:"the git branch of this issue's work, e.g. clasp/ACME-12: work in a worktree of your repository on it"`
	RetryAfterSeconds int    `json:"retryAfterSeconds,omitempty" jsonschema:"none_available: call claim_next_issue again after this many seconds"`
}

// CommentOut is add_comment's answer.
type CommentOut struct {
	Envelope
	Issue   string       `json:"issue,omitempty" jsonschema:"identifier of the issue commented"`
	Comment *CommentView `json:"comment,omitempty"`
}

func viewIssue(iss *clasp.Issue, me string, holder *Holder) *IssueView {
	v := &IssueView{Identifier: iss.Identifier, ID: iss.ID, Title: iss.Title, Description: iss.Description,
		Status: string(iss.Status), Priority: string(iss.Priority), HeldBy: holder, CheckoutEpoch: iss.CheckoutEpoch}
	if iss.AssigneeAgentID != nil {
		v.Assignee = *iss.AssigneeAgentID
		if *iss.AssigneeAgentID == me {
			v.Assignee = "you"
		}
	}
	v.Ready = iss.UnresolvedBlockerCount == 0
	unresolved := map[string]bool{}
	for _, id := range iss.UnresolvedBlockerIssueIDs {
		unresolved[id] = true
	}
	for _, b := range iss.BlockedBy {
		v.BlockedBy = append(v.BlockedBy, DepView{Identifier: b.Identifier, Title: b.Title, Status: string(b.Status)})
		if unresolved[b.ID] {
			v.WaitingOn = append(v.WaitingOn, b.Identifier)
		}
	}
	for _, d := range iss.Blocks {
		v.Blocks = append(v.Blocks, DepView{Identifier: d.Identifier, Title: d.Title, Status: string(d.Status)})
	}
	return v
}
