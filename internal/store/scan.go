package store

import (
	"fmt"

	"github.com/clasp-dev/clasp"
)

// Column lists of the resources' rows, in the order the scan functions
// below read them; both dialects' tables have these columns.
const (
	CompanyCols = `id, name, issue_prefix, branch_template, created_at, archived_at, escalate_after_failures`
	AgentCols   = `id, company_id, name, name_key, role, status, created_at, last_heartbeat_at`
	KeyCols     = `id, agent_id, prefix, created_at, last_used_at, revoked_at, name`
	RunCols     = `id, company_id, agent_id, status, invocation_source, issue_id, retry_of_run_id, attempt, pid, host_id,
		lease_expires_at, last_sign_of_life_at, started_at, finished_at, exit_code, error_code, error, created_at`
	IssueCols = `id, company_id, identifier, title, description, status, priority, assignee_agent_id,
		checkout_run_id, checkout_epoch, execution_run_id, execution_agent_name_key, execution_locked_at,
		started_at, completed_at, cancelled_at, created_at, updated_at, parent_id, unresolved_blocker_count, completed_epoch, relation_count`
	CommentCols  = `id, issue_id, body, author_agent_id, author_board, run_id, created_at`
	ActivityCols = `id, company_id, actor_type, actor_id, run_id, action, entity_type, entity_id, details, created_at, request_id`
)

// The scan functions read one row of the matching column list (above)
// into a new value; the *Dest functions return the destinations of those
// columns, for rows that carry more columns after them. Nullable columns
// scan into pointers (NULL: nil), times through Time/NullTime (UTC), in
// both dialects. Errors: the Row's own (the dialect's no-rows error when
// there was no row).

// ScanCompany reads a CompanyCols row.
func ScanCompany(sc Row) (*clasp.Company, error) {
	var c clasp.Company
	var esc int64
	if err := sc.Scan(&c.ID, &c.Name, &c.IssuePrefix, &c.BranchTemplate, Time(&c.CreatedAt), NullTime(&c.ArchivedAt), &esc); err != nil {
		return nil, err
	}
	c.EscalateAfterFailures = int(esc)
	return &c, nil
}

// ScanAgent reads an AgentCols row.
func ScanAgent(sc Row) (*clasp.Agent, error) {
	var a clasp.Agent
	if err := sc.Scan(AgentDest(&a)...); err != nil {
		return nil, err
	}
	return &a, nil
}

// AgentDest are the destinations of AgentCols in a.
func AgentDest(a *clasp.Agent) []any {
	return []any{&a.ID, &a.CompanyID, &a.Name, &a.NameKey, &a.Role, &a.Status, Time(&a.CreatedAt), NullTime(&a.LastHeartbeatAt)}
}

// ScanKey reads a KeyCols row.
func ScanKey(sc Row) (*clasp.APIKey, error) {
	var k clasp.APIKey
	if err := sc.Scan(KeyDest(&k)...); err != nil {
		return nil, err
	}
	return &k, nil
}

// KeyDest are the destinations of KeyCols in k.
func KeyDest(k *clasp.APIKey) []any {
	return []any{&k.ID, &k.AgentID, &k.Prefix, Time(&k.CreatedAt), NullTime(&k.LastUsedAt), NullTime(&k.RevokedAt), &k.Name}
}

// ScanRun reads a RunCols row.
func ScanRun(sc Row) (*clasp.Run, error) {
	var r clasp.Run
	if err := sc.Scan(RunDest(&r)...); err != nil {
		return nil, err
	}
	return &r, nil
}

// RunDest are the destinations of RunCols in r.
func RunDest(r *clasp.Run) []any {
	return []any{&r.ID, &r.CompanyID, &r.AgentID, &r.Status, &r.InvocationSource, &r.IssueID, &r.RetryOfRunID, &r.Attempt, &r.PID, &r.HostID,
		NullTime(&r.LeaseExpiresAt), NullTime(&r.LastSignOfLifeAt), NullTime(&r.StartedAt), NullTime(&r.FinishedAt),
		&r.ExitCode, &r.ErrorCode, &r.Error, Time(&r.CreatedAt)}
}

// ScanIssue reads an IssueCols row.
func ScanIssue(sc Row) (*clasp.Issue, error) {
	var i clasp.Issue
	if err := sc.Scan(IssueDest(&i)...); err != nil {
		return nil, err
	}
	return &i, nil
}

// IssueDest are the destinations of IssueCols in i.
func IssueDest(i *clasp.Issue) []any {
	return []any{&i.ID, &i.CompanyID, &i.Identifier, &i.Title, &i.Description, &i.Status, &i.Priority, &i.AssigneeAgentID,
		&i.CheckoutRunID, &i.CheckoutEpoch, &i.ExecutionRunID, &i.ExecutionAgentNameKey, NullTime(&i.ExecutionLockedAt),
		NullTime(&i.StartedAt), NullTime(&i.CompletedAt), NullTime(&i.CancelledAt), Time(&i.CreatedAt), Time(&i.UpdatedAt),
		&i.ParentID, readyCount{i}, &i.CompletedEpoch, &i.RelationCount}
}

// readyCount is the scan destination of unresolved_blocker_count: it sets
// the issue's UnresolvedBlockerCount and DependencyReady (count 0, RULES.md
// D1) together, so every answer that scans an issue carries both.
type readyCount struct{ i *clasp.Issue }

// Scan implements sql.Scanner: an integer (int64, or int32 from
// PostgreSQL).
func (r readyCount) Scan(v any) error {
	switch x := v.(type) {
	case int64:
		r.i.UnresolvedBlockerCount = int(x)
	case int32:
		r.i.UnresolvedBlockerCount = int(x)
	default:
		return fmt.Errorf("scan unresolved_blocker_count: unsupported column value of type %T", v)
	}
	r.i.DependencyReady = r.i.UnresolvedBlockerCount == 0
	return nil
}

// ScanComment reads a CommentCols row.
func ScanComment(sc Row) (*clasp.Comment, error) {
	var c clasp.Comment
	if err := sc.Scan(&c.ID, &c.IssueID, &c.Body, &c.AuthorAgentID, &c.AuthorBoard, &c.RunID, Time(&c.CreatedAt)); err != nil {
		return nil, err
	}
	return &c, nil
}

// ScanActivity reads an ActivityCols row.
func ScanActivity(sc Row) (*clasp.Activity, error) { return ScanActivityExtra(sc) }

// ScanActivityExtra reads an ActivityCols row, then the row's further
// columns into extra.
func ScanActivityExtra(sc Row, extra ...any) (*clasp.Activity, error) {
	var (
		a       clasp.Activity
		details []byte
	)
	dest := append([]any{&a.ID, &a.CompanyID, &a.ActorType, &a.ActorID, &a.RunID, &a.Action, &a.EntityType, &a.EntityID,
		&details, Time(&a.CreatedAt), &a.RequestID}, extra...)
	if err := sc.Scan(dest...); err != nil {
		return nil, err
	}
	a.Details = details
	return &a, nil
}

// ScanAll reads every row of rows with scan, then closes rows. Errors:
// scan's, or the rows' (Rows.Err).
func ScanAll[T any](rows Rows, scan func(Row) (*T, error)) ([]*T, error) {
	defer rows.Close()
	var out []*T
	for rows.Next() {
		v, err := scan(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, rows.Err()
}
