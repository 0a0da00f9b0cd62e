package board

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/url"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/clasp-dev/clasp"
)

// seg is one piece of a sentence the board writes: plain text, or a link
// (Href set) to the page of the agent, issue or run it names.
type seg struct {
	Text string
	Href string
}

// actRow is one activity row as the board shows it: who did it and what
// they did, as sentences whose names link to their pages, and the row's
// raw details JSON (indented) for whoever wants every field.
type actRow struct {
	A        *clasp.Activity
	Actor    []seg
	Sentence []seg
	JSON     string
}

// sentence builds a sentence from its parts: a string is text, a seg is
// itself, a []seg is spliced in.
func sentence(parts ...any) []seg {
	var out []seg
	for _, p := range parts {
		switch v := p.(type) {
		case string:
			if v == "" {
				continue
			}
			if n := len(out); n > 0 && out[n-1].Href == "" {
				out[n-1].Text += v
				continue
			}
			out = append(out, seg{Text: v})
		case seg:
			out = append(out, v)
		case []seg:
			out = append(out, v...)
		}
	}
	return out
}

// issueRef returns the link to issue id, named by its identifier.
func (l *lookup) issueRef(id string) seg {
	if l.idents == nil {
		l.idents = map[string]string{}
	}
	ident, ok := l.idents[id]
	if !ok {
		var iss clasp.Issue
		if _, err := l.c.get("/api/issues/"+url.PathEscape(id), &iss); err == nil {
			ident = iss.Identifier
		}
		l.idents[id] = ident
	}
	if ident == "" {
		return seg{Text: "a deleted issue"}
	}
	return seg{Text: ident, Href: "/issues/" + url.PathEscape(ident) + "?company=" + url.QueryEscape(l.companyID)}
}

// knownIssue is issueRef for an issue whose identifier the row itself
// names (ident, "" when it does not): no lookup is needed.
func (l *lookup) knownIssue(id, ident string) seg {
	if ident != "" {
		if l.idents == nil {
			l.idents = map[string]string{}
		}
		l.idents[id] = ident
	}
	return l.issueRef(id)
}

// agentRef returns the link to agent id (its section of the Agents page),
// named by its name.
func (l *lookup) agentRef(id string) seg {
	a := l.agents[id]
	if a == nil {
		return seg{Text: "an agent of another company"}
	}
	return seg{Text: a.Name, Href: "/agents?company=" + url.QueryEscape(l.companyID) + "#ag-" + id}
}

// runRef returns the link to run id's page, named by its agent and the time
// it was opened ("builder's run of 14:05:12").
func (l *lookup) runRef(id string) seg {
	href := "/runs/" + url.PathEscape(id) + "?company=" + url.QueryEscape(l.companyID)
	r := l.run(id)
	if r == nil {
		return seg{Text: "a run", Href: href}
	}
	return seg{Text: l.agentName(r.AgentID) + "'s run of " + r.CreatedAt.UTC().Format("15:04:05"), Href: href}
}

// entityRef names the entity of row a.
func (l *lookup) entityRef(a *clasp.Activity) seg {
	switch a.EntityType {
	case "issue":
		return l.issueRef(a.EntityID)
	case "agent":
		return l.agentRef(a.EntityID)
	case "run":
		return l.runRef(a.EntityID)
	case "company":
		return seg{Text: "the company"}
	}
	return seg{Text: "a " + a.EntityType}
}

// actorRef names who wrote row a, whose sentence is what: an agent with
// the run it acted in, unless the sentence names that run already.
func (l *lookup) actorRef(a *clasp.Activity, what []seg) []seg {
	switch a.ActorType {
	case clasp.ActorAgent:
		s := []seg{l.agentRef(a.ActorID)}
		if a.RunID != nil {
			run := l.runRef(*a.RunID)
			if !slices.Contains(what, run) {
				s = sentence(s, " in ", run)
			}
		}
		return s
	case clasp.ActorBoard:
		return []seg{{Text: "the board"}}
	case clasp.ActorSystem:
		return []seg{{Text: "the server"}}
	}
	return []seg{{Text: string(a.ActorType)}}
}

// details are the fields of the activity rows' details the sentences read.
type details struct {
	Identifier             string                     `json:"identifier"`
	Title                  string                     `json:"title"`
	Status                 string                     `json:"status"`
	Priority               string                     `json:"priority"`
	AgentID                string                     `json:"agentId"`
	RunID                  string                     `json:"runId"`
	IssueID                string                     `json:"issueId"`
	CheckoutEpoch          *int64                     `json:"checkoutEpoch"`
	PreviousCheckoutRunID  string                     `json:"previousCheckoutRunId"`
	PreviousExecutionRunID string                     `json:"previousExecutionRunId"`
	ClearedCheckoutRunID   string                     `json:"clearedCheckoutRunId"`
	ClearedExecutionRunID  string                     `json:"clearedExecutionRunId"`
	FromRunID              string                     `json:"fromRunId"`
	ToRunID                string                     `json:"toRunId"`
	RetryOfRunID           string                     `json:"retryOfRunId"`
	EndedRunID             string                     `json:"endedRunId"`
	BlockedByRunID         string                     `json:"blockedByRunId"`
	RunStatus              string                     `json:"runStatus"`
	Why                    string                     `json:"why"`
	Reason                 string                     `json:"reason"`
	Cause                  string                     `json:"cause"`
	Outcome                string                     `json:"outcome"`
	ErrorCode              string                     `json:"errorCode"`
	InvocationSource       string                     `json:"invocationSource"`
	AdapterType            string                     `json:"adapterType"`
	Name                   string                     `json:"name"`
	IssuePrefix            string                     `json:"issuePrefix"`
	Prefix                 string                     `json:"prefix"`
	Unassigned             bool                       `json:"unassigned"`
	ClearAssignee          bool                       `json:"clearAssignee"`
	LocksCleared           bool                       `json:"locksCleared"`
	BoardCheckout          bool                       `json:"boardCheckout"`
	Attempt                int                        `json:"attempt"`
	ExitCode               *int                       `json:"exitCode"`
	Changes                map[string]json.RawMessage `json:"changes"`
	BlockerIssueID         string                     `json:"blockerIssueId"`
	BlockerIdentifier      string                     `json:"blockerIdentifier"`
	ParentID               string                     `json:"parentId"`
	ParentIdentifier       string                     `json:"parentIdentifier"`
	Failures               int                        `json:"failures"`
}

// change is one field's {from, to} in an update's changes.
type change struct {
	From any `json:"from"`
	To   any `json:"to"`
}

// heldBy returns " held by RUN" for the first non-empty run id ("" when none).
func (l *lookup) heldBy(ids ...string) []seg {
	for _, id := range ids {
		if id != "" {
			return sentence(" held by ", l.runRef(id))
		}
	}
	return nil
}

// word returns a status or code as words ("in_progress" → "in progress").
func word(v any) string {
	if v == nil {
		return "nothing"
	}
	return strings.ReplaceAll(fmt.Sprint(v), "_", " ")
}

// describe returns what row a says, as a sentence whose subject is its actor
// (left out: "checked out ACME-5 at epoch 1 for builder").
func (l *lookup) describe(a *clasp.Activity) []seg {
	var d details
	_ = json.Unmarshal(a.Details, &d)
	e := l.entityRef(a)
	switch a.Action {
	case clasp.ActionIssueCreated:
		s := sentence("created ", e)
		if d.Title != "" {
			s = sentence(s, " “"+d.Title+"”")
		}
		if d.Status != "" {
			s = sentence(s, " in "+word(d.Status))
		}
		if d.Priority != "" {
			s = sentence(s, ", priority "+d.Priority)
		}
		if d.AgentID != "" {
			s = sentence(s, ", for ", l.agentRef(d.AgentID))
		}
		return s
	case clasp.ActionIssueUpdated:
		return l.describeUpdate(e, d)
	case clasp.ActionIssueCheckedOut:
		s := sentence("checked out ", e)
		if d.CheckoutEpoch != nil {
			s = sentence(s, fmt.Sprintf(" at epoch %d", *d.CheckoutEpoch))
		}
		if d.AgentID != "" {
			s = sentence(s, " for ", l.agentRef(d.AgentID))
		}
		if d.RunID != "" {
			s = sentence(s, " in ", l.runRef(d.RunID))
		}
		return s
	case clasp.ActionIssueLockAdopted:
		s := sentence("adopted the lock of ", e, l.heldBy(d.PreviousCheckoutRunID, d.PreviousExecutionRunID))
		if d.Why != "" {
			s = sentence(s, " ("+word(d.Why)+")")
		}
		return s
	case clasp.ActionIssueReleased:
		s := sentence("released ", e)
		if d.Unassigned {
			s = sentence(s, " and unassigned it")
		}
		if d.Cause == "agent_terminated" {
			s = sentence(s, ", as its agent was terminated")
		}
		return s
	case clasp.ActionIssueLockReleased:
		s := sentence("released the lock of ", e)
		if d.RunID != "" {
			s = sentence(s, " when ", l.runRef(d.RunID), " ended")
			if d.RunStatus != "" {
				s = sentence(s, " ("+word(d.RunStatus)+")")
			}
		}
		return s
	case clasp.ActionIssueStaleLockCleared:
		s := sentence("cleared the stale lock of ", e, l.heldBy(d.ClearedCheckoutRunID, d.ClearedExecutionRunID))
		if d.Why != "" {
			s = sentence(s, " ("+word(d.Why)+")")
		}
		return s
	case clasp.ActionIssueForceRelease:
		s := sentence("force-released ", e, l.heldBy(d.PreviousCheckoutRunID, d.PreviousExecutionRunID))
		if d.ClearAssignee {
			s = sentence(s, " and cleared its assignee")
		}
		if d.Reason != "" {
			s = sentence(s, ", saying “"+d.Reason+"”")
		}
		return s
	case clasp.ActionIssueCommented:
		return sentence("commented on ", e)
	case clasp.ActionIssueExecutionLocked:
		return sentence("gave the execution lock of ", e, " to ", l.runRef(d.RunID))
	case clasp.ActionIssueLockMoved:
		return sentence("moved the execution lock of ", e, " from ", l.runRef(d.FromRunID), " to its retry, ", l.runRef(d.ToRunID))
	case clasp.ActionRunQueued:
		s := sentence("queued ", e)
		if d.Reason != "" {
			s = sentence(s, " ("+word(d.Reason)+")")
		}
		if d.IssueID != "" {
			s = sentence(s, " for ", l.issueRef(d.IssueID))
		}
		if d.RetryOfRunID != "" {
			s = sentence(s, fmt.Sprintf(", attempt %d, retrying ", d.Attempt), l.runRef(d.RetryOfRunID))
		}
		return s
	case clasp.ActionRunStarted:
		s := sentence("started ", e)
		if d.InvocationSource != "" {
			s = sentence(s, " ("+word(d.InvocationSource)+")")
		}
		if d.IssueID != "" {
			s = sentence(s, " for ", l.issueRef(d.IssueID))
		}
		return s
	case clasp.ActionRunFinished:
		s := sentence("ended ", e)
		if d.Status != "" {
			s = sentence(s, " as "+word(d.Status))
		}
		if d.ExitCode != nil {
			s = sentence(s, fmt.Sprintf(", exit code %d", *d.ExitCode))
		}
		if d.ErrorCode != "" {
			s = sentence(s, " ("+word(d.ErrorCode)+")")
		}
		return s
	case clasp.ActionRunLost:
		s := sentence("marked ", e, " lost")
		if d.ErrorCode != "" {
			s = sentence(s, " ("+word(d.ErrorCode)+")")
		}
		return s
	case clasp.ActionCompanyCreated:
		s := sentence("created the company")
		if d.Name != "" {
			s = sentence(s, " “"+d.Name+"”")
		}
		if d.IssuePrefix != "" {
			s = sentence(s, " with issue prefix "+d.IssuePrefix)
		}
		return s
	case clasp.ActionCompanyArchived:
		return sentence("archived the company")
	case clasp.ActionCompanyUnarchived:
		return sentence("restored the company from the archive")
	case clasp.ActionAgentCreated:
		return sentence("created the agent ", e)
	case clasp.ActionAgentUpdated:
		fields := make([]string, 0, len(d.Changes))
		for k := range d.Changes {
			fields = append(fields, k)
		}
		sort.Strings(fields)
		s := sentence("changed ", e)
		if d.Status != "" {
			return sentence(s, " to "+word(d.Status))
		}
		for i, f := range fields {
			var c change
			sep := ", "
			if i == 0 {
				sep = ": "
			}
			if json.Unmarshal(d.Changes[f], &c) == nil && (c.From != nil || c.To != nil) {
				s = sentence(s, sep+f+" from "+word(c.From)+" to "+word(c.To))
			} else {
				s = sentence(s, sep+f)
			}
		}
		return s
	case clasp.ActionAgentKeyCreated:
		return sentence("created the API key "+d.Prefix+"… of ", e)
	case clasp.ActionAgentKeyRevoked:
		return sentence("revoked the API key "+d.Prefix+"… of ", e)
	case clasp.ActionAgentAdapterSet:
		if d.AdapterType == "" {
			return sentence("removed the adapter of ", e)
		}
		return sentence("set the adapter of ", e, " to "+d.AdapterType)
	case clasp.ActionWakeRequested:
		s := sentence("asked to wake ", e)
		if d.IssueID != "" {
			s = sentence(s, " for ", l.issueRef(d.IssueID))
		}
		if d.Outcome != "" {
			s = sentence(s, ": "+word(d.Outcome))
		}
		if d.RunID != "" {
			s = sentence(s, ", ", l.runRef(d.RunID))
		}
		if d.BlockedByRunID != "" {
			s = sentence(s, ", behind ", l.runRef(d.BlockedByRunID))
		}
		return s
	case clasp.ActionIssueBlockerAdded:
		return sentence("made ", e, " wait for ", l.knownIssue(d.BlockerIssueID, d.BlockerIdentifier))
	case clasp.ActionIssueBlockerRemoved:
		return sentence("stopped ", e, " waiting for ", l.knownIssue(d.BlockerIssueID, d.BlockerIdentifier))
	case clasp.ActionIssueParentChanged:
		if d.ParentID == "" {
			return sentence("made ", e, " a top-level issue")
		}
		return sentence("made ", e, " a sub-issue of ", l.knownIssue(d.ParentID, d.ParentIdentifier))
	case clasp.ActionIssueBlockersResolved:
		return sentence("found every blocker of ", e, " done: it may start")
	case clasp.ActionIssueEscalated:
		s := sentence("escalated ", e, " to a person after "+strconv.Itoa(d.Failures)+" failed runs in a row, and blocked it")
		if h := l.heldBy(d.PreviousCheckoutRunID, d.PreviousExecutionRunID); h != nil {
			s = sentence(s, "; it was", h)
		}
		return s
	case clasp.ActionCompanyUpdated:
		return sentence("changed after how many failed runs in a row the company escalates an issue")
	case clasp.ActionIssueChildrenCompleted:
		return sentence("found every sub-issue of ", e, " closed")
	case clasp.ActionWakePromoted:
		s := sentence("woke ", e, " as asked earlier")
		if d.RunID != "" {
			s = sentence(s, ", in ", l.runRef(d.RunID))
		}
		if d.EndedRunID != "" {
			s = sentence(s, ", once ", l.runRef(d.EndedRunID), " ended")
		}
		return s
	}
	return sentence("recorded "+word(strings.ReplaceAll(a.Action, ".", " "))+" on ", e)
}

// describeUpdate is the sentence of issue.updated: each changed field from
// its old value to its new one.
func (l *lookup) describeUpdate(e seg, d details) []seg {
	fields := make([]string, 0, len(d.Changes))
	for k := range d.Changes {
		fields = append(fields, k)
	}
	sort.Strings(fields)
	if d.BoardCheckout {
		var c change
		_ = json.Unmarshal(d.Changes["assigneeAgentId"], &c)
		s := sentence("checked out ", e)
		if c.To != nil {
			s = sentence(s, " for ", l.agentRef(fmt.Sprint(c.To)))
		}
		return sentence(s, " from the board, to be taken by its agent's next run")
	}
	var s []seg
	for i, f := range fields {
		var c change
		_ = json.Unmarshal(d.Changes[f], &c)
		if i > 0 {
			s = sentence(s, "; ")
		}
		switch f {
		case "assigneeAgentId":
			switch {
			case c.To == nil && c.From != nil:
				s = sentence(s, "unassigned ", l.agentRef(fmt.Sprint(c.From)))
			case c.To != nil:
				s = sentence(s, "assigned it to ", l.agentRef(fmt.Sprint(c.To)))
			default:
				s = sentence(s, "left it unassigned")
			}
		case "description":
			s = sentence(s, "edited the description")
		case "title":
			s = sentence(s, "renamed it from “"+fmt.Sprint(c.From)+"” to “"+fmt.Sprint(c.To)+"”")
		default:
			s = sentence(s, "changed "+f+" from "+word(c.From)+" to "+word(c.To))
		}
	}
	if len(s) == 0 {
		s = sentence("updated ", e)
	} else {
		s = sentence(s, " on ", e)
	}
	if d.LocksCleared {
		s = sentence(s, ", clearing its locks")
	}
	switch d.Cause {
	case "":
	case "agent_terminated":
		s = sentence(s, ", as its agent was terminated")
	default:
		s = sentence(s, " ("+word(d.Cause)+")")
	}
	return s
}

// rows turns activity rows into the board's sentences.
func (l *lookup) rows(acts []*clasp.Activity) []actRow {
	out := make([]actRow, 0, len(acts))
	for _, a := range acts {
		r := actRow{A: a, Sentence: l.describe(a)}
		r.Actor = l.actorRef(a, r.Sentence)
		var buf bytes.Buffer
		if json.Indent(&buf, a.Details, "", "  ") == nil {
			r.JSON = buf.String()
		} else {
			r.JSON = string(a.Details)
		}
		out = append(out, r)
	}
	return out
}
