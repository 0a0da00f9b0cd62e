package client

import (
	"cmp"
	"encoding/json"
	"net/url"
	"strconv"
	"strings"

	"github.com/clasp-dev/clasp"
)

// CompanyCreateRequest is the body of POST /api/companies. IssuePrefix is
// 2-10 upper-case letters, unique across companies (409 already_exists);
// empty, it is not sent and the server derives one from Name
// (clasp.IssuePrefixCandidates: the first one no other company has).
type CompanyCreateRequest struct {
	Name        string `json:"name"`
	IssuePrefix string `json:"issuePrefix,omitempty"`
	// BranchTemplate names the branches of the company's issues
	// ("" is clasp.DefaultBranchTemplate, "clasp/{identifier}").
	BranchTemplate string `json:"branchTemplate,omitempty"`
	// EscalateAfterFailures (nil: the server's default, 3) is how many runs
	// of an issue in a row may fail before it is escalated; 0 never.
	EscalateAfterFailures *int `json:"escalateAfterFailures,omitempty"`
}

// CompanyUpdateRequest is the body of PATCH /api/companies/{companyId}:
// the fields set are changed, the nil ones kept.
type CompanyUpdateRequest struct {
	Name                  *string `json:"name,omitempty"`
	BranchTemplate        *string `json:"branchTemplate,omitempty"`
	EscalateAfterFailures *int    `json:"escalateAfterFailures,omitempty"`
}

// AgentCreateRequest is the body of POST /api/companies/{companyId}/agents.
// The name's key (trimmed, lower-cased) is unique per company.
type AgentCreateRequest struct {
	Name string `json:"name"`
	Role string `json:"role,omitempty"`
}

// AgentUpdateRequest is the body of PATCH /api/agents/{id}; nil fields are
// not sent. Terminating revokes the agent's keys; a taken name answers 409
// already_exists.
type AgentUpdateRequest struct {
	Status *clasp.AgentStatus `json:"status,omitempty"`
	Name   *string            `json:"name,omitempty"`
	Role   *string            `json:"role,omitempty"`
}

// RunOpenRequest is the body of POST /api/agents/me/runs. IssueID (a UUID
// or identifier) and InvocationSource are optional.
type RunOpenRequest struct {
	IssueID          string `json:"issueId,omitempty"`
	InvocationSource string `json:"invocationSource,omitempty"`
}

// RunFinishRequest is the body of POST /api/runs/{id}/finish. Status is one
// of succeeded, failed, cancelled, timed_out.
type RunFinishRequest struct {
	Status   clasp.RunStatus `json:"status"`
	ExitCode *int            `json:"exitCode,omitempty"`
	Error    *string         `json:"error,omitempty"`
}

// RunListParams filters GET /api/companies/{companyId}/runs (newest first).
// Zero fields are not sent.
type RunListParams struct {
	Statuses []clasp.RunStatus
	AgentID  string
	Limit    int    // 1..1000, default 100
	Cursor   string // from Page.NextCursor
}

func (p RunListParams) values() url.Values {
	v := url.Values{}
	if len(p.Statuses) > 0 {
		s := make([]string, len(p.Statuses))
		for i, st := range p.Statuses {
			s[i] = string(st)
		}
		v.Set("status", strings.Join(s, ","))
	}
	setNonEmpty(v, "agentId", p.AgentID)
	setPage(v, p.Limit, p.Cursor)
	return v
}

// IssueCreateRequest is the body of POST /api/companies/{companyId}/issues.
// Title is required; Status defaults to backlog and Priority to medium.
type IssueCreateRequest struct {
	Title           string            `json:"title"`
	Description     string            `json:"description,omitempty"`
	Status          clasp.IssueStatus `json:"status,omitempty"`
	Priority        clasp.Priority    `json:"priority,omitempty"`
	AssigneeAgentID string            `json:"assigneeAgentId,omitempty"`
	// ParentID is the issue this one is a part of (UUID or identifier of
	// the same company); BlockedByIssueIDs the issues that must be done
	// before it enters in_progress or done (RULES.md, Dependencies).
	ParentID          string   `json:"parentId,omitempty"`
	BlockedByIssueIDs []string `json:"blockedByIssueIds,omitempty"`
}

// IssueListParams filters GET /api/companies/{companyId}/issues (newest
// first). Zero fields are not sent.
type IssueListParams struct {
	Statuses        []clasp.IssueStatus
	AssigneeAgentID string
	Query           string // q: substring of title or identifier
	Ready           bool   // only issues whose blockers are all done
	ParentID        string // only the children of this issue (its id)
	Limit           int    // 1..1000, default 100
	Cursor          string // from Page.NextCursor
}

func (p IssueListParams) values() url.Values {
	v := url.Values{}
	if len(p.Statuses) > 0 {
		s := make([]string, len(p.Statuses))
		for i, st := range p.Statuses {
			s[i] = string(st)
		}
		v.Set("status", strings.Join(s, ","))
	}
	setNonEmpty(v, "assigneeAgentId", p.AssigneeAgentID)
	setNonEmpty(v, "q", p.Query)
	if p.Ready {
		v.Set("ready", "true")
	}
	setNonEmpty(v, "parentId", p.ParentID)
	setPage(v, p.Limit, p.Cursor)
	return v
}

// IssueUpdateRequest is the body of PATCH /api/issues/{id}: only the fields
// set are sent. To unassign, set Unassign (sends "assigneeAgentId": null);
// it wins over AssigneeAgentID. Comment is written in the same transaction
// as the change (RULES.md, Errors and requests), so a result and status done land together.
type IssueUpdateRequest struct {
	Title           *string
	Description     *string
	Status          *clasp.IssueStatus
	Priority        *clasp.Priority
	AssigneeAgentID *string
	Unassign        bool
	// ParentID moves the issue under another (UUID or identifier); a
	// pointer to "" makes it top-level (sends null).
	ParentID *string
	// BlockedByIssueIDs, when not nil, replaces the issue's blockers (a
	// pointer to an empty list removes them all).
	BlockedByIssueIDs *[]string
	Comment           *string
}

// MarshalJSON writes only the set fields, and assigneeAgentId null for Unassign.
func (r IssueUpdateRequest) MarshalJSON() ([]byte, error) {
	m := map[string]any{}
	if r.Title != nil {
		m["title"] = *r.Title
	}
	if r.Description != nil {
		m["description"] = *r.Description
	}
	if r.Status != nil {
		m["status"] = *r.Status
	}
	if r.Priority != nil {
		m["priority"] = *r.Priority
	}
	if r.Unassign {
		m["assigneeAgentId"] = nil
	} else if r.AssigneeAgentID != nil {
		m["assigneeAgentId"] = *r.AssigneeAgentID
	}
	if r.ParentID != nil {
		if *r.ParentID == "" {
			m["parentId"] = nil
		} else {
			m["parentId"] = *r.ParentID
		}
	}
	if r.BlockedByIssueIDs != nil {
		ids := *r.BlockedByIssueIDs
		if ids == nil {
			ids = []string{}
		}
		m["blockedByIssueIds"] = ids
	}
	if r.Comment != nil {
		m["comment"] = *r.Comment
	}
	return json.Marshal(m)
}

// CheckoutRequest is the body of POST /api/issues/{id}/checkout (rule L1):
// AgentID is the calling agent (403 agent_mismatch otherwise) and
// ExpectedStatuses a non-empty list of open statuses.
type CheckoutRequest struct {
	AgentID          string              `json:"agentId"`
	ExpectedStatuses []clasp.IssueStatus `json:"expectedStatuses"`
}

// ClaimRequest is the body of POST /api/agents/me/claim (claim-next).
// ExpectedStatuses defaults to [todo]; Scope is "mine", "unassigned" or
// "any" (default: the agent's issues or unassigned ones).
type ClaimRequest struct {
	ExpectedStatuses []clasp.IssueStatus `json:"expectedStatuses,omitempty"`
	Scope            string              `json:"scope,omitempty"`
}

// ReleaseRequest is the body of POST /api/issues/{id}/release (rule L4);
// Unassign clears the assignee as well.
type ReleaseRequest struct {
	Unassign bool `json:"unassign,omitempty"`
}

// ForceReleaseRequest is the body of POST /api/issues/{id}/admin/force-release
// (board only): Reason is recorded in the audit row; ClearAssignee also
// unassigns.
type ForceReleaseRequest struct {
	Reason        string `json:"reason"`
	ClearAssignee bool   `json:"clearAssignee,omitempty"`
}

// CommentCreateRequest is the body of POST /api/issues/{id}/comments.
type CommentCreateRequest struct {
	Body string `json:"body"`
}

// CommentListParams filters GET /api/issues/{id}/comments.
type CommentListParams struct {
	After string // a comment id: list the comments written after it
	Limit int    // page size (CommentList follows every page)
	// Order is "asc" (oldest first; the client's default, sent
	// explicitly) or "desc" (newest first, the server's default).
	Order string
}

func (p CommentListParams) values() url.Values {
	v := url.Values{}
	setNonEmpty(v, "after", p.After)
	v.Set("order", cmp.Or(p.Order, "asc"))
	setPage(v, p.Limit, "")
	return v
}

// ActivityListParams filters the activity endpoints (newest first).
type ActivityListParams struct {
	Action   string // an action to keep, on both endpoints
	EntityID string // an entity's id (on an issue's activity, its own id keeps every row, another none)
	Limit    int
	Cursor   string
}

func (p ActivityListParams) values() url.Values {
	v := url.Values{}
	setNonEmpty(v, "action", p.Action)
	setNonEmpty(v, "entityId", p.EntityID)
	setPage(v, p.Limit, p.Cursor)
	return v
}

// ListParams pages the lists that take no filter (companies, agents).
type ListParams struct {
	Limit  int
	Cursor string
}

func (p ListParams) values() url.Values {
	v := url.Values{}
	setPage(v, p.Limit, p.Cursor)
	return v
}

func setNonEmpty(v url.Values, k, s string) {
	if s != "" {
		v.Set(k, s)
	}
}

func setPage(v url.Values, limit int, cursor string) {
	if limit > 0 {
		v.Set("limit", strconv.Itoa(limit))
	}
	setNonEmpty(v, "cursor", cursor)
}
