package clasp

import "time"

// IssueStatus is the status of an issue.
type IssueStatus string

// Issue statuses.
const (
	IssueBacklog    IssueStatus = "backlog"
	IssueTodo       IssueStatus = "todo"
	IssueInProgress IssueStatus = "in_progress"
	IssueInReview   IssueStatus = "in_review"
	IssueBlocked    IssueStatus = "blocked"
	IssueDone       IssueStatus = "done"
	IssueCancelled  IssueStatus = "cancelled"
)

// IssueStatuses lists every issue status.
var IssueStatuses = []IssueStatus{IssueBacklog, IssueTodo, IssueInProgress, IssueInReview, IssueBlocked, IssueDone, IssueCancelled}

// Valid reports whether s is a known issue status.
func (s IssueStatus) Valid() bool {
	for _, v := range IssueStatuses {
		if s == v {
			return true
		}
	}
	return false
}

// Closed reports whether s is done or cancelled; a checkout can never expect
// a closed status (rule L1: 422).
func (s IssueStatus) Closed() bool { return s == IssueDone || s == IssueCancelled }

// Priority is the urgency of an issue.
type Priority string

// Priorities, most urgent first. Medium is the default.
const (
	PriorityCritical Priority = "critical"
	PriorityHigh     Priority = "high"
	PriorityMedium   Priority = "medium"
	PriorityLow      Priority = "low"
)

// Valid reports whether p is a known priority.
func (p Priority) Valid() bool {
	switch p {
	case PriorityCritical, PriorityHigh, PriorityMedium, PriorityLow:
		return true
	}
	return false
}

// Rank returns 0 for critical up to 3 for low (lower is more urgent).
func (p Priority) Rank() int {
	switch p {
	case PriorityCritical:
		return 0
	case PriorityHigh:
		return 1
	case PriorityLow:
		return 3
	}
	return 2
}

// Issue is a unit of work. CheckoutRunID is the checkout
// lock, ExecutionRunID (with ExecutionAgentNameKey and ExecutionLockedAt) the
// execution lock; CheckoutEpoch is the fencing token, raised by one at every
// new acquisition. Invariant L7: CheckoutRunID set implies Status in_progress
// and ExecutionRunID equal to it.
type Issue struct {
	ID                    string      `json:"id"`
	CompanyID             string      `json:"companyId"`
	Identifier            string      `json:"identifier"`
	Title                 string      `json:"title"`
	Description           string      `json:"description"`
	Status                IssueStatus `json:"status"`
	Priority              Priority    `json:"priority"`
	AssigneeAgentID       *string     `json:"assigneeAgentId"`
	CheckoutRunID         *string     `json:"checkoutRunId"`
	CheckoutEpoch         int64       `json:"checkoutEpoch"`
	ExecutionRunID        *string     `json:"executionRunId"`
	ExecutionAgentNameKey *string     `json:"executionAgentNameKey"`
	ExecutionLockedAt     *time.Time  `json:"executionLockedAt"`
	StartedAt             *time.Time  `json:"startedAt"`
	CompletedAt           *time.Time  `json:"completedAt"`
	CancelledAt           *time.Time  `json:"cancelledAt"`
	CreatedAt             time.Time   `json:"createdAt"`
	UpdatedAt             time.Time   `json:"updatedAt"`

	// ParentID is the issue this one is a part of (same company; the
	// parent chain has no cycle); nil for a top-level issue.
	ParentID *string `json:"parentId"`
	// UnresolvedBlockerCount is how many of the issues blocking this one
	// are not done (a cancelled blocker stays unresolved until its edge is
	// removed). The store maintains it in the transaction of every status
	// and edge change, so that readiness is one column of the issue's row.
	UnresolvedBlockerCount int `json:"unresolvedBlockerCount"`
	// DependencyReady is UnresolvedBlockerCount == 0: the issue may enter
	// in_progress or done (RULES.md, Dependencies).
	DependencyReady bool `json:"dependencyReady"`
	// BlockedBy and Blocks are the issues blocking this one and the issues
	// it blocks, each as a summary, ordered by identifier number; never
	// null. UnresolvedBlockerIssueIDs are the ids of the BlockedBy issues
	// that are not done. These three are filled by the server from the
	// edge table (store.IssueRelations), not from the issue's row.
	BlockedBy                 []IssueSummary `json:"blockedBy"`
	Blocks                    []IssueSummary `json:"blocks"`
	UnresolvedBlockerIssueIDs []string       `json:"unresolvedBlockerIssueIds"`

	// CompletedEpoch is the checkoutEpoch under which the issue moved to
	// done (set by the statement that moves it, nil while it is not done):
	// a stamp of that epoch is finished work, an older one superseded
	// work (RULES.md, The git gate).
	CompletedEpoch *int64 `json:"completedEpoch"`
	// RelationCount is how many dependency edges touch the issue, as the
	// blocked issue or as the blocker, as the issue's row keeps it (D9).
	// The server reads BlockedBy and Blocks only for an issue whose count
	// is above 0; it is not part of the JSON answer (0 in a decoded one).
	RelationCount int `json:"-"`
	// Workspace is where the holder works: set on the answers that grant
	// the issue to a run (checkout, claim), absent elsewhere.
	Workspace *Workspace `json:"workspace,omitempty"`
}

// IssueSummary names an issue another issue's answer refers to: a
// blocker, a dependent, a parent or an ancestor.
type IssueSummary struct {
	ID         string      `json:"id"`
	Identifier string      `json:"identifier"`
	Title      string      `json:"title"`
	Status     IssueStatus `json:"status"`
}

// IssueRelations are an issue's dependency edges and readiness as the
// edge table holds them (store.IssueRelations): its blockers, its
// dependents, the ids of its unresolved blockers, and its ancestors
// (parent first, then the parent's parent, up to the top).
type IssueRelations struct {
	BlockedBy                 []IssueSummary
	Blocks                    []IssueSummary
	UnresolvedBlockerIssueIDs []string
	Ancestors                 []IssueSummary
}

// SetRelations fills the issue's relation fields from r (nil: none),
// lists never nil, and DependencyReady from UnresolvedBlockerCount.
func (i *Issue) SetRelations(r *IssueRelations) {
	if r == nil {
		r = &IssueRelations{}
	}
	i.BlockedBy = orEmpty(r.BlockedBy)
	i.Blocks = orEmpty(r.Blocks)
	i.UnresolvedBlockerIssueIDs = orEmpty(r.UnresolvedBlockerIssueIDs)
	i.DependencyReady = i.UnresolvedBlockerCount == 0
}

// orEmpty is s, or an empty slice for nil, so that JSON answers carry []
// and never null.
func orEmpty[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}

// InboxItem is one row of GET /agents/me/inbox-lite: an issue assigned to the
// calling agent with status todo, in_progress or blocked. ActiveRun is the
// live run holding its execution lock, if any.
type InboxItem struct {
	ID         string      `json:"id"`
	Identifier string      `json:"identifier"`
	Title      string      `json:"title"`
	Status     IssueStatus `json:"status"`
	Priority   Priority    `json:"priority"`
	UpdatedAt  time.Time   `json:"updatedAt"`
	ActiveRun  *ActiveRun  `json:"activeRun"`
	// ParentID and the readiness fields, as on Issue (Paperclip's
	// inbox-lite carries them too); UnresolvedBlockerIssueIDs is never null.
	ParentID                  *string  `json:"parentId"`
	DependencyReady           bool     `json:"dependencyReady"`
	UnresolvedBlockerCount    int      `json:"unresolvedBlockerCount"`
	UnresolvedBlockerIssueIDs []string `json:"unresolvedBlockerIssueIds"`
}

// ActiveRun names the run holding an inbox issue's execution lock.
type ActiveRun struct {
	ID     string    `json:"id"`
	Status RunStatus `json:"status"`
}

// Comment is a note on an issue by an agent (AuthorAgentID, RunID) or the
// board (AuthorBoard true).
type Comment struct {
	ID            string    `json:"id"`
	IssueID       string    `json:"issueId"`
	Body          string    `json:"body"`
	AuthorAgentID *string   `json:"authorAgentId"`
	AuthorBoard   bool      `json:"authorBoard"`
	RunID         *string   `json:"runId"`
	CreatedAt     time.Time `json:"createdAt"`
}
