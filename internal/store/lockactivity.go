package store

// The activity rows of the lock rules and the sweeper (RULES.md L3, L4,
// L6, L7, sweeper pass 2), for a dialect that writes them next to the
// rule's statement in the same transaction (SQLite has no writing CTEs).
// PostgreSQL's statements build the same shapes in SQL (sql/lock.sql);
// the contract suite checks both. Each builder takes the lock state the
// rule's statement saw before it (LockState) and the issue after it.

import (
	"unicode/utf8"

	"github.com/clasp-dev/clasp"
)

// Activity is one activity row: the company it belongs to, its action,
// the entity it is about and its details (marshalled as JSON).
type Activity struct {
	CompanyID, Action, EntityType, EntityID string
	Details                                 any
}

// Details of the lock activity rows.
type (
	checkedOutDetails struct {
		AgentID       string `json:"agentId"`
		RunID         string `json:"runId"`
		CheckoutEpoch int64  `json:"checkoutEpoch"`
	}
	lockAdoptedDetails struct {
		PreviousCheckoutRunID  any    `json:"previousCheckoutRunId"`
		PreviousExecutionRunID any    `json:"previousExecutionRunId"`
		Why                    string `json:"why"`
	}
	releasedDetails struct {
		PreviousCheckoutRunID  any    `json:"previousCheckoutRunId"`
		PreviousExecutionRunID any    `json:"previousExecutionRunId"`
		Unassigned             bool   `json:"unassigned"`
		Cause                  string `json:"cause,omitempty"` // "update" when a PATCH released it (L6)
	}
)

func issueRow(iss *clasp.Issue, action string, details any) Activity {
	return Activity{CompanyID: iss.CompanyID, Action: action, EntityType: "issue", EntityID: iss.ID, Details: details}
}

// CheckoutActivity is what a checkout or claim by agentID's run runID that
// changed iss writes (L1-L3): issue.checkout_lock_adopted
// {previousCheckoutRunId, previousExecutionRunId, why} when it displaced a
// dead holder of old (adoptedWhy is then that holder's state, else ""),
// then issue.checked_out {agentId, runId, checkoutEpoch}.
func CheckoutActivity(old *LockState, iss *clasp.Issue, agentID, runID string) (rows []Activity, adoptedWhy string) {
	if why, ok := old.Displaced(runID); ok { // L3
		adoptedWhy = why
		rows = append(rows, issueRow(iss, clasp.ActionIssueLockAdopted, lockAdoptedDetails{
			PreviousCheckoutRunID: OrNil(old.Checkout), PreviousExecutionRunID: OrNil(old.Execution), Why: why,
		}))
	}
	rows = append(rows, issueRow(iss, clasp.ActionIssueCheckedOut, checkedOutDetails{
		AgentID: agentID, RunID: runID, CheckoutEpoch: iss.CheckoutEpoch,
	}))
	return rows, adoptedWhy
}

// ReleaseActivity is what a release (L4) of the issue whose locks were old
// writes: issue.released {previousCheckoutRunId, previousExecutionRunId,
// unassigned}.
func ReleaseActivity(old *LockState, iss *clasp.Issue, unassigned bool) Activity {
	return issueRow(iss, clasp.ActionIssueReleased, releasedDetails{
		PreviousCheckoutRunID: OrNil(old.Checkout), PreviousExecutionRunID: OrNil(old.Execution), Unassigned: unassigned,
	})
}

// AuditFields are the fields of an issue that issue.updated reports as
// {changes: {field: {from, to}}}, as they were before a PATCH (statement
// IssueAudit).
type AuditFields struct {
	Title, Description, Status, Priority string
	Assignee                             *string
}

// Changes returns {field: {from, to}} for each audited field that differs
// in iss; descriptions are cut to 200 characters.
func (f *AuditFields) Changes(iss *clasp.Issue) map[string]any {
	m := map[string]any{}
	add := func(name string, from, to any, differ bool) {
		if differ {
			m[name] = map[string]any{"from": from, "to": to}
		}
	}
	add("title", f.Title, iss.Title, f.Title != iss.Title)
	add("description", cut200(f.Description), cut200(iss.Description), f.Description != iss.Description)
	add("status", f.Status, iss.Status, f.Status != string(iss.Status))
	add("priority", f.Priority, iss.Priority, f.Priority != string(iss.Priority))
	add("assigneeAgentId", OrNil(f.Assignee), iss.AssigneeAgentID, deref(f.Assignee) != deref(iss.AssigneeAgentID))
	return m
}

// cut200 is s cut to its first 200 characters.
func cut200(s string) string {
	if utf8.RuneCountInString(s) > 200 {
		return string([]rune(s)[:200])
	}
	return s
}

// PatchActivity is what a PATCH p (L5/L6) that changed iss writes, old
// being the lock state before it and before the audited fields before it:
// one row per lock change (L7), issue.released {..., cause: "update"} when
// it cleared the locks (L6), or, when the caller's run took them over from
// a dead holder, the rows of CheckoutActivity; then issue.updated
// {changes, and locksCleared, previousCheckoutRunId,
// previousExecutionRunId when it cleared the locks}.
func PatchActivity(before *AuditFields, old *LockState, iss *clasp.Issue, p *IssueUpdateParams) []Activity {
	a := p.Actor
	var rows []Activity
	cleared := old.Locked() && iss.CheckoutRunID == nil && iss.ExecutionRunID == nil
	switch {
	case cleared: // L6
		rel := ReleaseActivity(old, iss, p.AssigneeAgentID != nil && *p.AssigneeAgentID == "")
		d := rel.Details.(releasedDetails)
		d.Cause = "update"
		rel.Details = d
		rows = append(rows, rel)
	case a.RunID != "" && old.Locked() && !old.HeldBy(a.RunID) && deref(iss.CheckoutRunID) == a.RunID: // L5 adoption
		rows, _ = CheckoutActivity(old, iss, a.AgentID, a.RunID)
	}
	details := map[string]any{"changes": before.Changes(iss)}
	if cleared {
		details["locksCleared"] = true
		details["previousCheckoutRunId"] = OrNil(old.Checkout)
		details["previousExecutionRunId"] = OrNil(old.Execution)
	}
	return append(rows, issueRow(iss, clasp.ActionIssueUpdated, details))
}

// CauseAgentTerminated is the cause of the rows written for the issues a
// terminated agent was assigned (TerminateUnassignActivity).
const CauseAgentTerminated = "agent_terminated"

// TerminateUnassignActivity is what terminating an agent (rule L6, agent
// terminated) writes for one open issue it was assigned, old being the
// issue's status, assignee and locks before the statement that unassigned
// it and iss the issue after it: issue.released {previousCheckoutRunId,
// previousExecutionRunId, unassigned: true, cause: "agent_terminated"}
// when that statement cleared a lock (L7), then issue.updated {changes:
// {assigneeAgentId, and status when in_progress became todo}, cause:
// "agent_terminated", and locksCleared, previousCheckoutRunId,
// previousExecutionRunId when it cleared a lock}.
func TerminateUnassignActivity(old *LockState, iss *clasp.Issue) []Activity {
	var rows []Activity
	changes := map[string]any{"assigneeAgentId": map[string]any{"from": OrNil(old.Assignee), "to": iss.AssigneeAgentID}}
	if old.Status != string(iss.Status) {
		changes["status"] = map[string]any{"from": old.Status, "to": iss.Status}
	}
	details := map[string]any{"changes": changes, "cause": CauseAgentTerminated}
	if old.Locked() {
		rows = append(rows, issueRow(iss, clasp.ActionIssueReleased, releasedDetails{
			PreviousCheckoutRunID: OrNil(old.Checkout), PreviousExecutionRunID: OrNil(old.Execution),
			Unassigned: true, Cause: CauseAgentTerminated,
		}))
		details["locksCleared"] = true
		details["previousCheckoutRunId"] = OrNil(old.Checkout)
		details["previousExecutionRunId"] = OrNil(old.Execution)
	}
	return append(rows, issueRow(iss, clasp.ActionIssueUpdated, details))
}
