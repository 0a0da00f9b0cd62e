package sqlite

import (
	"database/sql"
	"time"

	"github.com/clasp-dev/clasp"
	"github.com/clasp-dev/clasp/internal/store"
)

// Column lists, in the order the scan functions read them.
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

// scanner is a *sql.Row or *sql.Rows.
type scanner interface{ Scan(dest ...any) error }

func scanCompany(sc scanner) (*clasp.Company, error) {
	var c clasp.Company
	var created int64
	if err := sc.Scan(&c.ID, &c.Name, &c.IssuePrefix, &created); err != nil {
		return nil, err
	}
	c.CreatedAt = fromMicros(created)
	return &c, nil
}

func scanAgent(sc scanner) (*clasp.Agent, error) {
	var (
		a         clasp.Agent
		status    string
		created   int64
		heartbeat sql.NullInt64
	)
	if err := sc.Scan(&a.ID, &a.CompanyID, &a.Name, &a.NameKey, &a.Role, &status, &created, &heartbeat); err != nil {
		return nil, err
	}
	a.Status = clasp.AgentStatus(status)
	a.CreatedAt = fromMicros(created)
	a.LastHeartbeatAt = timePtr(heartbeat)
	return &a, nil
}

func scanKey(sc scanner) (*clasp.APIKey, error) {
	var (
		k             clasp.APIKey
		created       int64
		used, revoked sql.NullInt64
	)
	if err := sc.Scan(&k.ID, &k.AgentID, &k.Prefix, &created, &used, &revoked, &k.Name); err != nil {
		return nil, err
	}
	k.CreatedAt = fromMicros(created)
	k.LastUsedAt = timePtr(used)
	k.RevokedAt = timePtr(revoked)
	return &k, nil
}

func scanRun(sc scanner) (*clasp.Run, error) {
	var (
		r                                      clasp.Run
		status                                 string
		issue, retryOf, host, errCode, errText sql.NullString
		pid, exitCode                          sql.NullInt64
		lease, life, started, finished         sql.NullInt64
		created                                int64
	)
	err := sc.Scan(&r.ID, &r.CompanyID, &r.AgentID, &status, &r.InvocationSource, &issue, &retryOf, &r.Attempt, &pid, &host,
		&lease, &life, &started, &finished, &exitCode, &errCode, &errText, &created)
	if err != nil {
		return nil, err
	}
	r.Status = clasp.RunStatus(status)
	r.IssueID = strPtr(issue)
	r.RetryOfRunID = strPtr(retryOf)
	r.PID = intPtr(pid)
	r.HostID = strPtr(host)
	r.LeaseExpiresAt = timePtr(lease)
	r.LastSignOfLifeAt = timePtr(life)
	r.StartedAt = timePtr(started)
	r.FinishedAt = timePtr(finished)
	r.ExitCode = intPtr(exitCode)
	r.ErrorCode = strPtr(errCode)
	r.Error = strPtr(errText)
	r.CreatedAt = fromMicros(created)
	return &r, nil
}

func scanIssue(sc scanner) (*clasp.Issue, error) {
	var (
		i                                      clasp.Issue
		status, priority                       string
		assignee, checkout, execution, nameKey sql.NullString
		locked, started, completed, cancelled  sql.NullInt64
		created, updated                       int64
	)
	err := sc.Scan(&i.ID, &i.CompanyID, &i.Identifier, &i.Title, &i.Description, &status, &priority, &assignee,
		&checkout, &i.CheckoutEpoch, &execution, &nameKey, &locked,
		&started, &completed, &cancelled, &created, &updated)
	if err != nil {
		return nil, err
	}
	i.Status = clasp.IssueStatus(status)
	i.Priority = clasp.Priority(priority)
	i.AssigneeAgentID = strPtr(assignee)
	i.CheckoutRunID = strPtr(checkout)
	i.ExecutionRunID = strPtr(execution)
	i.ExecutionAgentNameKey = strPtr(nameKey)
	i.ExecutionLockedAt = timePtr(locked)
	i.StartedAt = timePtr(started)
	i.CompletedAt = timePtr(completed)
	i.CancelledAt = timePtr(cancelled)
	i.CreatedAt = fromMicros(created)
	i.UpdatedAt = fromMicros(updated)
	return &i, nil
}

func scanComment(sc scanner) (*clasp.Comment, error) {
	var (
		c             clasp.Comment
		author, runID sql.NullString
		created       int64
	)
	if err := sc.Scan(&c.ID, &c.IssueID, &c.Body, &author, &c.AuthorBoard, &runID, &created); err != nil {
		return nil, err
	}
	c.AuthorAgentID = strPtr(author)
	c.RunID = strPtr(runID)
	c.CreatedAt = fromMicros(created)
	return &c, nil
}

func scanActivity(sc scanner) (*clasp.Activity, error) {
	var (
		a         clasp.Activity
		actorType string
		runID     sql.NullString
		requestID sql.NullString
		details   string
		created   int64
	)
	if err := sc.Scan(&a.ID, &a.CompanyID, &actorType, &a.ActorID, &runID, &a.Action, &a.EntityType, &a.EntityID, &details, &created, &requestID); err != nil {
		return nil, err
	}
	a.ActorType = clasp.ActorType(actorType)
	a.RunID = strPtr(runID)
	a.RequestID = strPtr(requestID)
	a.Details = []byte(details)
	a.CreatedAt = fromMicros(created)
	return &a, nil
}

// scanAll reads every row with scan, then closes rows.
func scanAll[T any](rows *sql.Rows, scan func(scanner) (*T, error)) ([]*T, error) {
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

// scanRows reads every row into a T (dest gives the fields to scan into),
// then closes rows; all rows are read before the transaction runs its next
// statement.
func scanRows[T any](rows *sql.Rows, dest func(*T) []any) ([]T, error) {
	defer rows.Close()
	var out []T
	for rows.Next() {
		var v T
		if err := rows.Scan(dest(&v)...); err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, rows.Err()
}

// micros is t as unix microseconds (the storage format of every time column).
func micros(t time.Time) int64 { return t.UnixMicro() }

// fromMicros is the UTC time of unix microseconds v.
func fromMicros(v int64) time.Time { return time.UnixMicro(v).UTC() }

func timePtr(v sql.NullInt64) *time.Time {
	if !v.Valid {
		return nil
	}
	t := fromMicros(v.Int64)
	return &t
}

func strPtr(v sql.NullString) *string {
	if !v.Valid {
		return nil
	}
	return &v.String
}

func intPtr(v sql.NullInt64) *int {
	if !v.Valid {
		return nil
	}
	n := int(v.Int64)
	return &n
}

// nullable is s, or nil (SQL NULL) when s is empty.
func nullable(s string) any {
	if s == "" {
		return nil
	}
	return s
}

// nullString is *p, or nil (SQL NULL) when p is nil.
func nullString(p *string) any {
	if p == nil {
		return nil
	}
	return *p
}

// intArg is *p as an int64, or nil (SQL NULL) when p is nil.
func intArg(p *int) any {
	if p == nil {
		return nil
	}
	return int64(*p)
}

// The shared helpers live in package store (keys.go); these names keep
// the statements' call sites short.

func splitRef(ref string) (id, ident string)             { return store.SplitRef(ref) }
func pageLimit(n int) int                                { return store.PageLimit(n) }
func encodeIDCursor(id int64) string                     { return store.EncodeIDCursor(id) }
func scope(a store.Actor) string                         { return store.Scope(a) }
func encodeCursor(createdAt time.Time, id string) string { return store.EncodeCursor(createdAt, id) }
