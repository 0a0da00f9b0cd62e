package postgres

import (
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/clasp-dev/clasp"
	"github.com/clasp-dev/clasp/internal/store"
)

// Column lists, in the order the scan functions read them. qualify puts a
// table alias before each.
const (
	companyCols = `id, name, issue_prefix, created_at`
	agentCols   = `id, company_id, name, name_key, role, status, created_at, last_heartbeat_at`
	keyCols     = `id, agent_id, prefix, created_at, last_used_at, revoked_at, name`
	runCols     = `id, company_id, agent_id, status, invocation_source, issue_id, retry_of_run_id, attempt, pid, host_id,
		lease_expires_at, last_sign_of_life_at, started_at, finished_at, exit_code, error_code, error, created_at`
	issueCols = `id, company_id, identifier, title, description, status, priority, assignee_agent_id,
		checkout_run_id, checkout_epoch, execution_run_id, execution_agent_name_key, execution_locked_at,
		started_at, completed_at, cancelled_at, created_at, updated_at`
	commentCols  = `id, issue_id, body, author_agent_id, author_board, run_id, created_at`
	activityCols = `id, company_id, actor_type, actor_id, run_id, action, entity_type, entity_id, details, created_at, request_id`
)

// scanner is a pgx.Row or pgx.Rows.
type scanner interface{ Scan(dest ...any) error }

func scanCompany(sc scanner) (*clasp.Company, error) {
	var c clasp.Company
	if err := sc.Scan(&c.ID, &c.Name, &c.IssuePrefix, &c.CreatedAt); err != nil {
		return nil, err
	}
	c.CreatedAt = c.CreatedAt.UTC()
	return &c, nil
}

func scanAgent(sc scanner) (*clasp.Agent, error) {
	var a clasp.Agent
	if err := sc.Scan(agentDest(&a)...); err != nil {
		return nil, err
	}
	fixAgent(&a)
	return &a, nil
}

func agentDest(a *clasp.Agent) []any {
	return []any{&a.ID, &a.CompanyID, &a.Name, &a.NameKey, &a.Role, &a.Status, &a.CreatedAt, &a.LastHeartbeatAt}
}

func fixAgent(a *clasp.Agent) {
	a.CreatedAt = a.CreatedAt.UTC()
	a.LastHeartbeatAt = utc(a.LastHeartbeatAt)
}

func scanKey(sc scanner) (*clasp.APIKey, error) {
	var k clasp.APIKey
	if err := sc.Scan(&k.ID, &k.AgentID, &k.Prefix, &k.CreatedAt, &k.LastUsedAt, &k.RevokedAt, &k.Name); err != nil {
		return nil, err
	}
	k.CreatedAt = k.CreatedAt.UTC()
	k.LastUsedAt = utc(k.LastUsedAt)
	k.RevokedAt = utc(k.RevokedAt)
	return &k, nil
}

func scanRun(sc scanner) (*clasp.Run, error) {
	var r clasp.Run
	if err := sc.Scan(runDest(&r)...); err != nil {
		return nil, err
	}
	fixRun(&r)
	return &r, nil
}

func runDest(r *clasp.Run) []any {
	return []any{&r.ID, &r.CompanyID, &r.AgentID, &r.Status, &r.InvocationSource, &r.IssueID, &r.RetryOfRunID, &r.Attempt, &r.PID, &r.HostID,
		&r.LeaseExpiresAt, &r.LastSignOfLifeAt, &r.StartedAt, &r.FinishedAt, &r.ExitCode, &r.ErrorCode, &r.Error, &r.CreatedAt}
}

func fixRun(r *clasp.Run) {
	r.LeaseExpiresAt = utc(r.LeaseExpiresAt)
	r.LastSignOfLifeAt = utc(r.LastSignOfLifeAt)
	r.StartedAt = utc(r.StartedAt)
	r.FinishedAt = utc(r.FinishedAt)
	r.CreatedAt = r.CreatedAt.UTC()
}

func scanIssue(sc scanner) (*clasp.Issue, error) {
	var i clasp.Issue
	if err := sc.Scan(issueDest(&i)...); err != nil {
		return nil, err
	}
	fixIssue(&i)
	return &i, nil
}

func issueDest(i *clasp.Issue) []any {
	return []any{&i.ID, &i.CompanyID, &i.Identifier, &i.Title, &i.Description, &i.Status, &i.Priority, &i.AssigneeAgentID,
		&i.CheckoutRunID, &i.CheckoutEpoch, &i.ExecutionRunID, &i.ExecutionAgentNameKey, &i.ExecutionLockedAt,
		&i.StartedAt, &i.CompletedAt, &i.CancelledAt, &i.CreatedAt, &i.UpdatedAt}
}

func fixIssue(i *clasp.Issue) {
	i.ExecutionLockedAt = utc(i.ExecutionLockedAt)
	i.StartedAt = utc(i.StartedAt)
	i.CompletedAt = utc(i.CompletedAt)
	i.CancelledAt = utc(i.CancelledAt)
	i.CreatedAt = i.CreatedAt.UTC()
	i.UpdatedAt = i.UpdatedAt.UTC()
}

func scanComment(sc scanner) (*clasp.Comment, error) {
	var c clasp.Comment
	if err := sc.Scan(&c.ID, &c.IssueID, &c.Body, &c.AuthorAgentID, &c.AuthorBoard, &c.RunID, &c.CreatedAt); err != nil {
		return nil, err
	}
	c.CreatedAt = c.CreatedAt.UTC()
	return &c, nil
}

func scanActivity(sc scanner) (*clasp.Activity, error) {
	var (
		a       clasp.Activity
		details []byte
	)
	if err := sc.Scan(&a.ID, &a.CompanyID, &a.ActorType, &a.ActorID, &a.RunID, &a.Action, &a.EntityType, &a.EntityID, &details, &a.CreatedAt, &a.RequestID); err != nil {
		return nil, err
	}
	a.Details = details
	a.CreatedAt = a.CreatedAt.UTC()
	return &a, nil
}

// scanAll reads every row with scan, then closes rows.
func scanAll[T any](rows pgx.Rows, scan func(scanner) (*T, error)) ([]*T, error) {
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

// utc is *t in UTC, nil when t is nil.
func utc(t *time.Time) *time.Time {
	if t == nil {
		return nil
	}
	u := t.UTC()
	return &u
}

// nullable is s, or nil (SQL NULL) when s is empty.
func nullable(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

func deref(p *string) string {
	if p == nil {
		return ""
	}
	return *p
}

// The shared helpers live in package store (keys.go); these names keep
// the statements' call sites short.

func splitRef(ref string) (id, ident string)             { return store.SplitRef(ref) }
func pageLimit(n int) int                                { return store.PageLimit(n) }
func encodeIDCursor(id int64) string                     { return store.EncodeIDCursor(id) }
func scope(a store.Actor) string                         { return store.Scope(a) }
func encodeCursor(createdAt time.Time, id string) string { return store.EncodeCursor(createdAt, id) }

// actorArgs are the named arguments of an activity row's actor:
// @actor_type (agent, board or system), @actor_id and @actor_run (NULL
// when the actor acts in no run).
func actorArgs(args namedArgs, a store.Actor) namedArgs {
	t := a.Type
	if t != clasp.ActorAgent && t != clasp.ActorBoard {
		t = clasp.ActorSystem
	}
	args["actor_type"] = string(t)
	args["actor_id"] = a.ID()
	args["actor_run"] = nullable(a.RunID)
	args["actor_request"] = nullable(a.RequestID)
	return args
}

// scanActivityExtra is scanActivity for rows that carry extra columns
// after the activity's own, scanned into extra.
func scanActivityExtra(sc scanner, extra ...any) (*clasp.Activity, error) {
	var (
		a       clasp.Activity
		details []byte
	)
	dest := append([]any{&a.ID, &a.CompanyID, &a.ActorType, &a.ActorID, &a.RunID, &a.Action, &a.EntityType, &a.EntityID, &details, &a.CreatedAt, &a.RequestID}, extra...)
	if err := sc.Scan(dest...); err != nil {
		return nil, err
	}
	a.Details = details
	a.CreatedAt = a.CreatedAt.UTC()
	return &a, nil
}
