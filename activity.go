package clasp

import (
	"encoding/json"
	"time"
)

// ActorType says who made a change.
type ActorType string

// Actor types of activity rows.
const (
	ActorAgent  ActorType = "agent"
	ActorBoard  ActorType = "board"
	ActorSystem ActorType = "system" // the sweeper and the server itself
	// ActorGate is a gate token (RULES.md G4): it only reads, so no
	// activity row ever names it.
	ActorGate ActorType = "gate"
)

// Activity actions written by the lock rules (RULES.md, Lock rules) and the
// sweeper (RULES.md, The sweeper). Every lock change writes exactly one of the
// lock-changing actions (L7).
const (
	ActionIssueCreated          = "issue.created"
	ActionIssueUpdated          = "issue.updated"
	ActionIssueCheckedOut       = "issue.checked_out"
	ActionIssueLockAdopted      = "issue.checkout_lock_adopted"
	ActionIssueReleased         = "issue.released"
	ActionIssueLockReleased     = "issue.lock_released"
	ActionIssueStaleLockCleared = "issue.stale_lock_cleared"
	ActionIssueForceRelease     = "issue.admin_force_release"
	ActionIssueCommented        = "issue.commented"
	ActionRunStarted            = "run.started"
	ActionRunFinished           = "run.finished"
	ActionRunLost               = "run.lost"
	ActionCompanyCreated        = "company.created"
	ActionCompanyUpdated        = "company.updated"
	ActionCompanyArchived       = "company.archived"   // {name, issuePrefix}
	ActionCompanyUnarchived     = "company.unarchived" // {name, issuePrefix}
	ActionAgentCreated          = "agent.created"
	ActionAgentUpdated          = "agent.updated"
	ActionAgentKeyCreated       = "agent.key_created"
	ActionAgentKeyRevoked       = "agent.key_revoked"
)

// Activity actions of dependencies (RULES.md, Dependencies). Every edge
// change names both issues; the entity is the dependent (or the child).
const (
	ActionIssueBlockerAdded      = "issue.blocker_added"      // {blockerIssueId, blockerIdentifier, identifier}
	ActionIssueBlockerRemoved    = "issue.blocker_removed"    // {blockerIssueId, blockerIdentifier, identifier}
	ActionIssueParentChanged     = "issue.parent_changed"     // {parentId, parentIdentifier, previousParentId, identifier}
	ActionIssueBlockersResolved  = "issue.blockers_resolved"  // {identifier, readyGeneration}: the last unresolved blocker was resolved
	ActionIssueChildrenCompleted = "issue.children_completed" // {identifier, childrenGeneration}: every child is closed
)

// Actions lists every activity action clasp writes, the names of the
// event stream's events and of the events a webhook may subscribe to.
var Actions = []string{
	ActionIssueCreated, ActionIssueUpdated, ActionIssueCheckedOut, ActionIssueLockAdopted,
	ActionIssueReleased, ActionIssueLockReleased, ActionIssueStaleLockCleared, ActionIssueForceRelease,
	ActionIssueCommented, ActionRunStarted, ActionRunFinished, ActionRunLost,
	ActionCompanyCreated, ActionCompanyArchived, ActionCompanyUnarchived, ActionAgentCreated, ActionAgentUpdated, ActionAgentKeyCreated, ActionAgentKeyRevoked,
	ActionAgentAdapterSet, ActionWakeRequested, ActionWakePromoted, ActionRunQueued,
	ActionIssueExecutionLocked, ActionIssueLockMoved,
	ActionIssueBlockerAdded, ActionIssueBlockerRemoved, ActionIssueParentChanged,
	ActionIssueBlockersResolved, ActionIssueChildrenCompleted,
	ActionIssueEscalated, ActionCompanyUpdated,
}

// Activity is one append-only audit row. ID increases with every row written
// (it is an integer, not a UUID, so that lists and event streams can resume
// from it).
type Activity struct {
	ID        int64     `json:"id"`
	CompanyID string    `json:"companyId"`
	ActorType ActorType `json:"actorType"`
	ActorID   string    `json:"actorId"`
	RunID     *string   `json:"runId"`
	// RequestID is the id of the HTTP request that wrote the row (its
	// X-Request-Id); null for rows the server wrote on its own.
	RequestID  *string         `json:"requestId"`
	Action     string          `json:"action"`
	EntityType string          `json:"entityType"`
	EntityID   string          `json:"entityId"`
	Details    json.RawMessage `json:"details"`
	CreatedAt  time.Time       `json:"createdAt"`
}
