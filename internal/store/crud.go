package store

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/clasp-dev/clasp"
)

// CRUD implements, once, the Store methods whose algorithm is the same in
// every dialect (settings, companies, agents' reads, issue reads,
// comments, the activity list, keyset pages, the Idempotency-Key lookup)
// on a dialect's Driver. DB embeds it (NewCRUD); each dialect keeps only
// the statements these methods name.
type CRUD struct {
	d Driver
	// idemPurgedAt is the time (unix ns, Go clock: scheduling only) of
	// this process's last deletion of expired idempotency records.
	idemPurgedAt *atomic.Int64
}

// NewCRUD returns the shared methods running on d.
func NewCRUD(d Driver) CRUD { return CRUD{d: d, idemPurgedAt: new(atomic.Int64)} }

// activityWriter is implemented by the write Querier of a dialect whose
// statements do not write their own activity rows (SQLite): the shared
// code calls Activity after each change, in the same write, to record
// its audit row attributed to actor, details marshalled to a JSON object.
// A write Querier without it (PostgreSQL) writes each change's activity
// row in the change's own statement (a CTE fed by ActorArgs).
type activityWriter interface {
	Activity(ctx context.Context, companyID string, actor Actor, action, entityType, entityID string, details any) error
}

// activity records the audit row of a change through q when q writes
// activity rows itself (activityWriter); otherwise the change's statement
// wrote it and this does nothing.
func activity(ctx context.Context, q Querier, companyID string, actor Actor, action, entityType, entityID string, details any) error {
	if w, ok := q.(activityWriter); ok {
		return w.Activity(ctx, companyID, actor, action, entityType, entityID, details)
	}
	return nil
}

// ActorArgs adds to args the named arguments of an activity row's actor:
// actor_type (agent, board or system), actor_id, actor_run and
// actor_request (nil, NULL, when the actor acts in no run or request).
func ActorArgs(args Args, a Actor) Args {
	t := a.Type
	if t != clasp.ActorAgent && t != clasp.ActorBoard {
		t = clasp.ActorSystem
	}
	args["actor_type"], args["actor_id"] = string(t), a.ID()
	args["actor_run"], args["actor_request"] = nullable(a.RunID), nullable(a.RequestID)
	return args
}

// nullable is s, or nil (SQL NULL) when s is empty.
func nullable(s string) any {
	if s == "" {
		return nil
	}
	return s
}

// SettingGet returns the server setting key; 404 not_found if it is unset.
func (c CRUD) SettingGet(ctx context.Context, key string) (string, error) {
	var v string
	err := c.d.Read().QueryRow(ctx, "SettingGet", Args{"key": key}).Scan(&v)
	if c.d.NoRows(err) {
		return "", ErrNotFound("setting", key)
	}
	if err != nil {
		return "", c.d.Translate(fmt.Errorf("get setting %s: %w", key, err))
	}
	return v, nil
}

// SettingPutIfAbsent stores value under key unless the key is set, and
// returns the stored value (the existing one if there was one; of two
// concurrent first writers, the one that committed first): statement
// SettingInsert inserts or keeps the row and answers its value.
func (c CRUD) SettingPutIfAbsent(ctx context.Context, key, value string) (string, error) {
	var stored string
	err := c.d.Write(ctx, func(q Querier) error {
		err := q.QueryRow(ctx, "SettingInsert", Args{"key": key, "value": value}).Scan(&stored)
		return Wrap(err, "put setting %s", key)
	})
	return stored, err
}

// CompanyCreate creates a company and its company.created activity row.
// 400 invalid_request for an empty name or a prefix that is not 2-10
// upper-case letters; 409 already_exists (details.field issuePrefix) if
// the issue prefix is taken.
func (c CRUD) CompanyCreate(ctx context.Context, p *CompanyCreateParams) (*clasp.Company, error) {
	name := strings.TrimSpace(p.Name)
	if name == "" {
		return nil, clasp.InvalidField("name", "name is required.")
	}
	if !clasp.ValidIssuePrefix(p.IssuePrefix) {
		return nil, clasp.InvalidField("issuePrefix", "issuePrefix must be 2 to 10 upper-case letters.")
	}
	tmpl := cmp.Or(p.BranchTemplate, clasp.DefaultBranchTemplate)
	if err := clasp.ValidateBranchTemplate(tmpl); err != nil {
		return nil, err
	}
	esc := clasp.DefaultEscalateAfterFailures
	if p.EscalateAfterFailures != nil {
		esc = *p.EscalateAfterFailures
	}
	if esc < 0 || esc > clasp.MaxEscalateAfterFailures {
		return nil, clasp.InvalidField("escalateAfterFailures", "escalateAfterFailures must be from 0 (never escalate) to %d, not %d.", clasp.MaxEscalateAfterFailures, esc)
	}
	args := ActorArgs(Args{"id": c.d.NewID(), "name": name, "prefix": p.IssuePrefix, "branch_template": tmpl, "escalate": esc}, p.Actor)
	var out *clasp.Company
	err := c.d.Write(ctx, func(q Querier) error {
		co, err := ScanCompany(q.QueryRow(ctx, "CompanyInsert", args))
		if c.d.Unique(err) {
			return clasp.Errorf(clasp.CodeAlreadyExists, "Issue prefix %s is taken by another company.", p.IssuePrefix).
				WithDetails("field", "issuePrefix")
		}
		if err != nil {
			return Wrap(err, "create company")
		}
		out = co
		return activity(ctx, q, co.ID, p.Actor, clasp.ActionCompanyCreated, "company", co.ID, map[string]any{
			"name": co.Name, "issuePrefix": co.IssuePrefix,
		})
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// CompanyUpdate changes the name, branch template or escalation setting
// of company p.ID (a nil field is kept) and, when one changed, records
// company.updated {changes: {field: {from, to}}}. 400 invalid_request
// naming name (empty or over 200 characters), branchTemplate
// (clasp.ValidateBranchTemplate) or escalateAfterFailures (out of
// 0..clasp.MaxEscalateAfterFailures); 404 not_found for no such company.
func (c CRUD) CompanyUpdate(ctx context.Context, p *CompanyUpdateParams) (*clasp.Company, error) {
	args := Args{"id": p.ID, "name": nil, "branch_template": nil, "escalate": nil}
	if p.Name != nil {
		name := strings.TrimSpace(*p.Name)
		if name == "" || len(name) > 200 {
			return nil, clasp.InvalidField("name", "name is required, at most 200 characters.")
		}
		args["name"] = name
	}
	if p.BranchTemplate != nil {
		if err := clasp.ValidateBranchTemplate(*p.BranchTemplate); err != nil {
			return nil, err
		}
		args["branch_template"] = *p.BranchTemplate
	}
	if p.EscalateAfterFailures != nil {
		if v := *p.EscalateAfterFailures; v < 0 || v > clasp.MaxEscalateAfterFailures {
			return nil, clasp.InvalidField("escalateAfterFailures", "escalateAfterFailures must be from 0 (never escalate) to %d, not %d.", clasp.MaxEscalateAfterFailures, v)
		}
		args["escalate"] = *p.EscalateAfterFailures
	}
	args = ActorArgs(args, p.Actor)
	var out *clasp.Company
	err := c.d.Write(ctx, func(q Querier) error {
		before, err := ScanCompany(q.QueryRow(ctx, "CompanyGet", Args{"id": p.ID}))
		if c.d.NoRows(err) {
			return ErrNotFound("company", p.ID)
		}
		if err != nil {
			return Wrap(err, "get company %s", p.ID)
		}
		co, err := ScanCompany(q.QueryRow(ctx, "CompanyUpdate", args))
		if c.d.NoRows(err) {
			return ErrNotFound("company", p.ID)
		}
		if err != nil {
			return Wrap(err, "update company %s", p.ID)
		}
		out = co
		changes := map[string]any{}
		for _, f := range []struct {
			field    string
			from, to any
		}{
			{"name", before.Name, co.Name},
			{"branchTemplate", before.BranchTemplate, co.BranchTemplate},
			{"escalateAfterFailures", before.EscalateAfterFailures, co.EscalateAfterFailures},
		} {
			if f.from != f.to {
				changes[f.field] = map[string]any{"from": f.from, "to": f.to}
			}
		}
		if len(changes) == 0 {
			return nil
		}
		return activity(ctx, q, co.ID, p.Actor, clasp.ActionCompanyUpdated, "company", co.ID, map[string]any{"changes": changes})
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// CompanyGet returns a company; 404 not_found.
func (c CRUD) CompanyGet(ctx context.Context, id string) (*clasp.Company, error) {
	co, err := ScanCompany(c.d.Read().QueryRow(ctx, "CompanyGet", Args{"id": id}))
	if c.d.NoRows(err) {
		return nil, ErrNotFound("company", id)
	}
	if err != nil {
		return nil, c.d.Translate(fmt.Errorf("get company %s: %w", id, err))
	}
	return co, nil
}

// CompanyList returns companies, oldest first, one keyset page at a time;
// the archived ones only when includeArchived.
func (c CRUD) CompanyList(ctx context.Context, page Page, includeArchived bool) ([]*clasp.Company, string, error) {
	var where []string
	if !includeArchived {
		where = []string{"archived_at IS NULL"}
	}
	return ListPage(ctx, c.d, "companies", CompanyCols, where, nil, page, true, ScanCompany,
		func(co *clasp.Company) string { return EncodeCursor(co.CreatedAt, co.ID) })
}

// CompanyArchive archives company p.ID or restores it (statement
// CompanyArchive), writing company.archived or company.unarchived when the
// state changed; a company already in the asked state is answered as it
// is, with no row. 404 not_found.
func (c CRUD) CompanyArchive(ctx context.Context, p *CompanyArchiveParams) (*clasp.Company, error) {
	var out *clasp.Company
	err := c.d.Write(ctx, func(q Querier) error {
		var (
			co      clasp.Company
			esc     int64
			changed bool
		)
		err := q.QueryRow(ctx, "CompanyArchive", ActorArgs(Args{"id": p.ID, "archive": p.Archive}, p.Actor)).
			Scan(&co.ID, &co.Name, &co.IssuePrefix, &co.BranchTemplate, Time(&co.CreatedAt), NullTime(&co.ArchivedAt), &esc, &changed)
		if c.d.NoRows(err) {
			// no such company, or it is in that state already
			cur, err := ScanCompany(q.QueryRow(ctx, "CompanyGet", Args{"id": p.ID}))
			if c.d.NoRows(err) {
				return ErrNotFound("company", p.ID)
			}
			out = cur
			return Wrap(err, "get company %s", p.ID)
		}
		if err != nil {
			return Wrap(err, "archive company %s", p.ID)
		}
		co.EscalateAfterFailures = int(esc)
		out = &co
		if !changed {
			return nil
		}
		action := clasp.ActionCompanyUnarchived
		if p.Archive {
			action = clasp.ActionCompanyArchived
		}
		return activity(ctx, q, co.ID, p.Actor, action, "company", co.ID, map[string]any{
			"name": co.Name, "issuePrefix": co.IssuePrefix,
		})
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// ListPage runs one keyset page of table (columns cols, read by scan)
// ordered by (created_at, id): oldest first when asc, else newest first.
// where (conditions with ? placeholders) and args narrow it. It fetches
// one row more than the limit to know whether a next page exists, and
// returns the page and the cursor of the next one ("" on the last).
// Errors: 400 invalid_request for a bad cursor; the translated database
// error.
func ListPage[T any](ctx context.Context, d Driver, table, cols string, where []string, args []any, page Page,
	asc bool, scan func(Row) (*T, error), cursorOf func(*T) string) ([]*T, string, error) {
	q, args, limit, err := KeysetQuery(table, cols, where, args, page, asc, func(t time.Time) any { return t })
	if err != nil {
		return nil, "", err
	}
	list, err := selectAll(ctx, d, q, args, scan)
	if err != nil {
		return nil, "", d.Translate(fmt.Errorf("list %s: %w", table, err))
	}
	list, next := TrimPage(list, limit, cursorOf)
	return list, next, nil
}

// selectAll runs an ad hoc SELECT (Driver.Select) and scans every row.
func selectAll[T any](ctx context.Context, d Driver, q string, args []any, scan func(Row) (*T, error)) ([]*T, error) {
	rows, err := d.Select(ctx, q, args...)
	if err != nil {
		return nil, err
	}
	return ScanAll(rows, scan)
}

// ActivityList lists activity rows, newest first, narrowed to a company, an
// entity and an action when those are set. The cursor is the last row's id;
// nextCursor is "" on the last page. 400 invalid_request for a bad cursor.
func (c CRUD) ActivityList(ctx context.Context, p *ActivityListParams) ([]*clasp.Activity, string, error) {
	q, args, limit, err := ActivityQuery(ActivityCols, p)
	if err != nil {
		return nil, "", err
	}
	list, err := selectAll(ctx, c.d, q, args, ScanActivity)
	if err != nil {
		return nil, "", c.d.Translate(fmt.Errorf("list activity: %w", err))
	}
	list, next := TrimPage(list, limit, func(a *clasp.Activity) string { return EncodeIDCursor(a.ID) })
	return list, next, nil
}

// AgentCreate creates an active agent of a company and its agent.created
// activity row. 400 invalid_request for an empty name, 404 not_found if
// the company is missing, 409 already_exists if the name key is taken in
// the company.
func (c CRUD) AgentCreate(ctx context.Context, p *AgentCreateParams) (*clasp.Agent, error) {
	name, err := p.Validate()
	if err != nil {
		return nil, err
	}
	args := ActorArgs(Args{"id": c.d.NewID(), "name": name, "name_key": clasp.NameKey(name), "role": p.Role,
		"company": p.CompanyID}, p.Actor)
	var out *clasp.Agent
	err = c.d.Write(ctx, func(q Querier) error {
		a, err := ScanAgent(q.QueryRow(ctx, "AgentCreate", args))
		switch {
		case c.d.NoRows(err):
			return ErrNotFound("company", p.CompanyID)
		case c.d.Unique(err):
			return ErrAgentNameTaken(name)
		case err != nil:
			return Wrap(err, "create agent")
		}
		out = a
		return activity(ctx, q, a.CompanyID, p.Actor, clasp.ActionAgentCreated, "agent", a.ID, map[string]any{
			"name": a.Name, "role": a.Role,
		})
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// AgentGet returns an agent; 404 not_found.
func (c CRUD) AgentGet(ctx context.Context, id string) (*clasp.Agent, error) {
	a, err := ScanAgent(c.d.Read().QueryRow(ctx, "AgentGet", Args{"id": id}))
	if c.d.NoRows(err) {
		return nil, ErrNotFound("agent", id)
	}
	if err != nil {
		return nil, c.d.Translate(fmt.Errorf("get agent %s: %w", id, err))
	}
	return a, nil
}

// AgentList returns the agents of a company, oldest first.
func (c CRUD) AgentList(ctx context.Context, companyID string, page Page) ([]*clasp.Agent, string, error) {
	return ListPage(ctx, c.d, "agents", AgentCols, []string{"company_id = ?"}, []any{companyID}, page, true, ScanAgent,
		func(a *clasp.Agent) string { return EncodeCursor(a.CreatedAt, a.ID) })
}

// AgentKeyList lists an agent's keys, oldest first (never the secrets).
func (c CRUD) AgentKeyList(ctx context.Context, agentID string) ([]*clasp.APIKey, error) {
	keys, err := queryAll(ctx, c.d.Read(), "KeyList", Args{"agent": agentID}, ScanKey)
	if err != nil {
		return nil, c.d.Translate(fmt.Errorf("list keys of agent %s: %w", agentID, err))
	}
	return keys, nil
}

// queryAll runs the named statement on q and scans every row.
func queryAll[T any](ctx context.Context, q Querier, name string, args Args, scan func(Row) (*T, error)) ([]*T, error) {
	rows, err := q.Query(ctx, name, args)
	if err != nil {
		return nil, err
	}
	return ScanAll(rows, scan)
}

// IssueGet returns the issue whose UUID or identifier (case-insensitive) is
// ref; companyID, when not empty, scopes the lookup. 404 not_found.
func (c CRUD) IssueGet(ctx context.Context, companyID, ref string) (*clasp.Issue, error) {
	rid, rident := SplitRef(ref)
	iss, err := ScanIssue(c.d.Read().QueryRow(ctx, "IssueGet", Args{"rid": rid, "rident": rident, "company": companyID}))
	if c.d.NoRows(err) {
		return nil, ErrNotFound("issue", ref)
	}
	if err != nil {
		return nil, c.d.Translate(fmt.Errorf("get issue %s: %w", ref, err))
	}
	return iss, nil
}

// inboxLimit caps IssueInbox.
const inboxLimit = 1000

// IssueInbox lists the issues assigned to agentID with status todo,
// in_progress or blocked, most urgent first (then oldest first), at most
// 1000, each with the live run (by the store's clock) holding its
// execution lock, if any, its parent and its readiness (D9; the
// unresolved blockers' ids sorted, never nil).
func (c CRUD) IssueInbox(ctx context.Context, agentID string) ([]*clasp.InboxItem, error) {
	items, err := queryAll(ctx, c.d.Read(), "Inbox", Args{"agent": agentID, "limit": inboxLimit}, func(sc Row) (*clasp.InboxItem, error) {
		var (
			it               clasp.InboxItem
			runID, runStatus *string
			unresolved       *string
		)
		if err := sc.Scan(&it.ID, &it.Identifier, &it.Title, &it.Status, &it.Priority, Time(&it.UpdatedAt), &runID, &runStatus,
			&it.ParentID, &it.UnresolvedBlockerCount, &unresolved); err != nil {
			return nil, err
		}
		it.DependencyReady = it.UnresolvedBlockerCount == 0 // D9
		it.UnresolvedBlockerIssueIDs = []string{}
		if unresolved != nil && *unresolved != "" {
			it.UnresolvedBlockerIssueIDs = strings.Split(*unresolved, ",")
			slices.Sort(it.UnresolvedBlockerIssueIDs)
		}
		if runID != nil {
			it.ActiveRun = &clasp.ActiveRun{ID: *runID}
			if runStatus != nil {
				it.ActiveRun.Status = clasp.RunStatus(*runStatus)
			}
		}
		return &it, nil
	})
	if err != nil {
		return nil, c.d.Translate(fmt.Errorf("inbox of agent %s: %w", agentID, err))
	}
	return items, nil
}

// Wrap adds context to an unexpected database error (%w last); a
// *clasp.Error passes unchanged, nil is nil.
func Wrap(err error, format string, args ...any) error {
	if err == nil {
		return nil
	}
	if e := clasp.AsError(err); e != nil {
		return e
	}
	return fmt.Errorf(format+": %w", append(args, err)...)
}
