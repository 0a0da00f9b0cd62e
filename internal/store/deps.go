package store

// Issue dependencies (RULES.md, Dependencies, D1-D10), written once for
// both dialects on their named statements (sql/deps.sql). The counts that
// readiness is decided on (unresolved_blocker_count, open_child_count) are
// kept by the schema's triggers in the transaction of every status, parent
// and edge change; this file changes the edges, checks them (D3, D4),
// explains the refusals of D1/D2 and reads the relations (D9).

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/clasp-dev/clasp"
)

// DepChange is a change of issue IssueID's edges (D5), applied inside the
// write transaction of its creation or PATCH, before the PATCH's status
// change. Blockers, when not nil, is the full new list of blockers (UUIDs
// or identifiers of issues of CompanyID; duplicates count once); Parent,
// when not nil, is the new parent ("" for none).
type DepChange struct {
	CompanyID, IssueID, Identifier string
	Blockers                       *[]string
	Parent                         *string
	Actor                          Actor
}

// depRef is an issue an edge names: its id, identifier and status.
type depRef struct{ id, ident, status string }

// maxDepth bounds the walks up a parent chain (D3, D9).
const maxDepth = 100000

// ApplyDeps applies c on q, the write transaction's Querier (d tells its
// no-row error): for blockers the difference with the current edges
// (DepBlockerInsert and DepBlockerDelete, one issue.blocker_added or
// issue.blocker_removed each, in the order of the list), for the parent
// DepSetParent and issue.parent_changed. Before any edge is added or a
// parent set it takes the company's dependency lock (DepLockCompany) and
// then checks for cycles on what committed before (D3); the blockers of
// the edges that change are locked (DepLockBlockers, in id order) before
// the edges are inserted or deleted.
// Errors: 404 not_found naming a reference that is no issue of the
// company (details.field); 422 precondition_failed for the issue itself
// (details.field); 422 dependency_cycle (details.cycle: the identifiers
// along the cycle, from the issue back to it; details.field).
func ApplyDeps(ctx context.Context, q Querier, d Driver, c *DepChange) error {
	if c.Blockers == nil && c.Parent == nil {
		return nil
	}
	var want []depRef
	if c.Blockers != nil {
		seen := map[string]bool{}
		for _, ref := range *c.Blockers {
			r, err := depResolve(ctx, q, d, c, ref, "blockedByIssueIds")
			if err != nil {
				return err
			}
			if !seen[r.id] {
				seen[r.id] = true
				want = append(want, *r)
			}
		}
	}
	var parent *depRef
	if c.Parent != nil && *c.Parent != "" {
		var err error
		if parent, err = depResolve(ctx, q, d, c, *c.Parent, "parentId"); err != nil {
			return err
		}
	}
	var added, removed []depRef
	if c.Blockers != nil {
		cur, err := depList(ctx, q, "DepBlockerList", Args{"issue": c.IssueID})
		if err != nil {
			return fmt.Errorf("read blockers of issue %s: %w", c.IssueID, err)
		}
		has := map[string]bool{}
		for _, r := range cur {
			has[r.id] = true
		}
		keep := map[string]bool{}
		for _, r := range want {
			keep[r.id] = true
			if !has[r.id] {
				added = append(added, r)
			}
		}
		for _, r := range cur {
			if !keep[r.id] {
				removed = append(removed, r)
			}
		}
	}
	if len(added) > 0 || parent != nil {
		// D3: after this lock, the cycle checks see every edge committed
		// before, and no other transaction adds one until this commits.
		if _, err := q.Exec(ctx, "DepLockCompany", Args{"company": c.CompanyID}); err != nil {
			return fmt.Errorf("lock dependencies of company %s: %w", c.CompanyID, err)
		}
	}
	for _, r := range added {
		if err := depBlockerCycle(ctx, q, c, r); err != nil {
			return err
		}
	}
	if len(added)+len(removed) > 0 {
		// the blockers of every edge that changes, in id order, before
		// the edges and their counts (the triggers lock them again)
		ids := make([]string, 0, len(added)+len(removed))
		for _, r := range append(added, removed...) {
			ids = append(ids, r.id)
		}
		slices.Sort(ids)
		if _, err := q.Exec(ctx, "DepLockBlockers", Args{"ids": ids}); err != nil {
			return fmt.Errorf("lock blockers of issue %s: %w", c.IssueID, err)
		}
	}
	for _, r := range added {
		if _, err := q.Exec(ctx, "DepBlockerInsert", Args{"company": c.CompanyID, "issue": c.IssueID, "blocker": r.id}); err != nil {
			return fmt.Errorf("add blocker %s to issue %s: %w", r.id, c.IssueID, err)
		}
		if err := depLog(ctx, q, c, clasp.ActionIssueBlockerAdded, map[string]any{
			"identifier": c.Identifier, "blockerIssueId": r.id, "blockerIdentifier": r.ident}); err != nil {
			return err
		}
	}
	for _, r := range removed {
		if _, err := q.Exec(ctx, "DepBlockerDelete", Args{"issue": c.IssueID, "blocker": r.id}); err != nil {
			return fmt.Errorf("remove blocker %s of issue %s: %w", r.id, c.IssueID, err)
		}
		if err := depLog(ctx, q, c, clasp.ActionIssueBlockerRemoved, map[string]any{
			"identifier": c.Identifier, "blockerIssueId": r.id, "blockerIdentifier": r.ident}); err != nil {
			return err
		}
	}
	if c.Parent != nil {
		return depSetParent(ctx, q, c, parent)
	}
	return nil
}

// depResolve finds ref among the issues of c's company: 404 not_found
// (details.field field) when there is none, 422 precondition_failed when
// it is c's issue itself (D4).
func depResolve(ctx context.Context, q Querier, d Driver, c *DepChange, ref, field string) (*depRef, error) {
	rid, rident := SplitRef(ref)
	var r depRef
	err := q.QueryRow(ctx, "DepIssueRef", Args{"rid": rid, "rident": rident, "company": c.CompanyID}).Scan(&r.id, &r.ident, &r.status)
	if d.NoRows(err) {
		return nil, ErrNotFound("issue", ref).WithDetails("field", field)
	}
	if err != nil {
		return nil, fmt.Errorf("find issue %s: %w", ref, err)
	}
	if r.id == c.IssueID {
		what := "blocked by"
		if field == "parentId" {
			what = "a part of"
		}
		return nil, clasp.Errorf(clasp.CodePreconditionFailed, "Issue %s cannot be %s itself.", c.Identifier, what).
			WithDetails("field", field)
	}
	return &r, nil
}

// depBlockerCycle is D3 for the edge "c's issue blocked by r": 422
// dependency_cycle when c's issue already blocks r, directly or through
// other issues (statement DepBlockerCycle, which answers the walk from r
// only when it reached c's issue).
func depBlockerCycle(ctx context.Context, q Querier, c *DepChange, r depRef) error {
	rows, err := q.Query(ctx, "DepBlockerCycle", Args{"start": r.id, "target": c.IssueID})
	if err != nil {
		return fmt.Errorf("check blockers of issue %s: %w", r.id, err)
	}
	prev, ident := map[string]string{}, map[string]string{}
	err = eachRow(rows, func(sc Row) error {
		var (
			id, name string
			from     *string
		)
		if err := sc.Scan(&id, &from, &name); err != nil {
			return err
		}
		ident[id] = name
		if _, ok := prev[id]; !ok || from == nil {
			prev[id] = deref(from)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("check blockers of issue %s: %w", r.id, err)
	}
	if len(prev) == 0 {
		return nil
	}
	// back from c's issue to r along the walk: c's issue, ..., r
	path := []string{}
	for at := c.IssueID; at != "" && len(path) <= len(prev); at = prev[at] {
		path = append(path, at)
	}
	slices.Reverse(path) // r, ..., c's issue
	cycle := []string{c.Identifier}
	for _, id := range path {
		cycle = append(cycle, cmp.Or(ident[id], id))
	}
	return depCycleError(cycle, "blockedByIssueIds")
}

// depSetParent is D3 and D5 for the parent: parent nil makes c's issue
// top-level; else 422 dependency_cycle when c's issue is parent or one of
// its ancestors (DepAncestors). One issue.parent_changed when it changed.
func depSetParent(ctx context.Context, q Querier, c *DepChange, parent *depRef) error {
	var old *string
	if err := q.QueryRow(ctx, "DepParentOf", Args{"issue": c.IssueID}).Scan(&old); err != nil {
		return fmt.Errorf("read parent of issue %s: %w", c.IssueID, err)
	}
	var newID, newIdent any
	if parent != nil {
		chain, err := depList(ctx, q, "DepAncestors", Args{"start": parent.id, "max": maxDepth})
		if err != nil {
			return fmt.Errorf("read ancestors of issue %s: %w", parent.id, err)
		}
		for k, a := range chain {
			if a.id == c.IssueID {
				cycle := []string{c.Identifier}
				for _, x := range chain[:k+1] {
					cycle = append(cycle, x.ident)
				}
				return depCycleError(cycle, "parentId")
			}
		}
		newID, newIdent = parent.id, parent.ident
	}
	n, err := q.Exec(ctx, "DepSetParent", Args{"issue": c.IssueID, "parent": newID})
	if err != nil {
		return fmt.Errorf("set parent of issue %s: %w", c.IssueID, err)
	}
	if n == 0 {
		return nil
	}
	return depLog(ctx, q, c, clasp.ActionIssueParentChanged, map[string]any{
		"identifier": c.Identifier, "parentId": newID, "parentIdentifier": newIdent, "previousParentId": old})
}

// depCycleError is the 422 dependency_cycle naming the identifiers along
// the cycle (details.cycle, from the issue back to it) and the request
// field that would close it.
func depCycleError(cycle []string, field string) error {
	what := map[string]string{"blockedByIssueIds": "blocker", "parentId": "parent"}[field]
	return clasp.Errorf(clasp.CodeDependencyCycle, "This %s would close a cycle: %s.", what, strings.Join(cycle, " → ")).
		WithDetails("cycle", cycle, "field", field)
}

// depLog writes the activity row of an edge change of c's issue.
func depLog(ctx context.Context, q Querier, c *DepChange, action string, details map[string]any) error {
	return LogActivityRow(ctx, q, c.CompanyID, c.Actor, action, "issue", c.IssueID, details)
}

// LogActivityRow writes one activity row through q, the write
// transaction's Querier: through the dialect's own writer when it has one
// (SQLite), else statement ActivityInsert.
func LogActivityRow(ctx context.Context, q Querier, companyID string, actor Actor, action, entityType, entityID string, details any) error {
	if w, ok := q.(activityWriter); ok {
		return w.Activity(ctx, companyID, actor, action, entityType, entityID, details)
	}
	b, err := jsonMarshal(details)
	if err != nil {
		return fmt.Errorf("activity %s details: %w", action, err)
	}
	args := ActorArgs(Args{"company": companyID, "action": action, "entity_type": entityType, "entity_id": entityID,
		"details": b}, actor)
	if _, err := q.Exec(ctx, "ActivityInsert", args); err != nil {
		return fmt.Errorf("write activity %s of %s %s: %w", action, entityType, entityID, err)
	}
	return nil
}

// jsonMarshal is v as a JSON text.
func jsonMarshal(v any) (string, error) {
	b, err := json.Marshal(v)
	return string(b), err
}

// depList runs the named statement for (id, identifier) rows.
func depList(ctx context.Context, q Querier, name string, args Args) ([]depRef, error) {
	rows, err := q.Query(ctx, name, args)
	if err != nil {
		return nil, err
	}
	var out []depRef
	err = eachRow(rows, func(sc Row) error {
		var r depRef
		if err := sc.Scan(&r.id, &r.ident); err != nil {
			return err
		}
		out = append(out, r)
		return nil
	})
	return out, err
}

// eachRow calls fn for every row of rows, then closes them.
func eachRow(rows Rows, fn func(Row) error) error {
	defer rows.Close()
	for rows.Next() {
		if err := fn(rows); err != nil {
			return err
		}
	}
	return rows.Err()
}

// errBlocked is the refusal of D1/D2 as a lock rule's explanation knows
// it (lockrules.go): 422 blocked_by_unresolved for issue l, without the
// blockers' names, which BlockedDetails adds.
func errBlocked(l *LockState) *clasp.Error {
	return clasp.Errorf(clasp.CodeBlockedByUnresolved, "Issue %s is blocked by %d unresolved issues.", l.Name(), l.UnresolvedBlockers).
		WithDetails("issueId", l.IssueID, "unresolvedBlockerIssueIds", []string{})
}

// BlockedDetails completes a 422 blocked_by_unresolved refusal err of
// the issue the caller named ref (D1, D2) from a read of its unresolved
// blockers on q (DepUnresolved): details.unresolvedBlockerIssueIds, and a
// message naming their identifiers and the issue as LockState.Name does.
// Any other error passes unchanged.
func BlockedDetails(ctx context.Context, q Querier, err error, ref string) error {
	e := clasp.AsError(err)
	if e == nil || e.Code != clasp.CodeBlockedByUnresolved {
		return err
	}
	issueID, _ := e.Details["issueId"].(string)
	return BlockedError(ctx, q, issueID, refName(ref, issueID))
}

// BlockedError is the 422 blocked_by_unresolved of issue issueID (named
// identifier in the message; "": its id) read on q: the ids of its
// blockers that are not done (details.unresolvedBlockerIssueIds, by
// identifier number) and their identifiers in the message.
func BlockedError(ctx context.Context, q Querier, issueID, identifier string) error {
	ids, names, err := unresolvedBlockers(ctx, q, issueID)
	if err != nil {
		return err
	}
	name := cmp.Or(identifier, issueID)
	return clasp.Errorf(clasp.CodeBlockedByUnresolved,
		"Issue %s is blocked by unresolved issues: %s; each must be done first (or removed from blockedByIssueIds).",
		name, strings.Join(names, ", ")).WithDetails("issueId", issueID, "unresolvedBlockerIssueIds", ids)
}

// unresolvedBlockers reads on q the blockers of issueID that are not done
// (statement DepUnresolved), by identifier number: their ids and their
// identifiers.
func unresolvedBlockers(ctx context.Context, q Querier, issueID string) (ids, names []string, err error) {
	bl, err := depList(ctx, q, "DepUnresolved", Args{"issue": issueID})
	if err != nil {
		return nil, nil, fmt.Errorf("read unresolved blockers of issue %s: %w", issueID, err)
	}
	slices.SortFunc(bl, func(a, b depRef) int { return cmpIdent(a.ident, b.ident) })
	ids, names = make([]string, len(bl)), make([]string, len(bl))
	for i, r := range bl {
		ids[i], names[i] = r.id, r.ident
	}
	return ids, names, nil
}

// cmpIdent orders identifiers PREFIX-N by prefix, then number.
func cmpIdent(a, b string) int {
	pa, na := splitIdent(a)
	pb, nb := splitIdent(b)
	return cmp.Or(strings.Compare(pa, pb), cmp.Compare(na, nb))
}

func splitIdent(s string) (string, int) {
	k := strings.LastIndexByte(s, '-')
	if k < 0 {
		return s, 0
	}
	n, _ := strconv.Atoi(s[k+1:])
	return s[:k], n
}

// IssueRelations reads the relations of issues ids of companyID in one
// statement (DepRelations, D9): blockers and dependents ordered by
// identifier number, the unresolved blockers' ids in that order, and the
// ancestors nearest first. An id of no issue of the company has no entry.
func (c CRUD) IssueRelations(ctx context.Context, companyID string, ids []string) (map[string]*clasp.IssueRelations, error) {
	out := map[string]*clasp.IssueRelations{}
	if len(ids) == 0 {
		return out, nil
	}
	rows, err := c.d.Read().Query(ctx, "DepRelations", Args{"ids": ids, "company": companyID})
	if err != nil {
		return nil, c.d.Translate(fmt.Errorf("read relations: %w", err))
	}
	depth := map[string]map[string]int{}
	err = eachRow(rows, func(sc Row) error {
		var (
			kind, subject string
			s             clasp.IssueSummary
			d             int
		)
		if err := sc.Scan(&kind, &subject, &s.ID, &s.Identifier, &s.Title, &s.Status, &d); err != nil {
			return err
		}
		r := out[subject]
		if r == nil {
			r = &clasp.IssueRelations{}
			out[subject] = r
		}
		switch kind {
		case "blocker":
			r.BlockedBy = append(r.BlockedBy, s)
		case "dependent":
			r.Blocks = append(r.Blocks, s)
		case "ancestor":
			r.Ancestors = append(r.Ancestors, s)
			if depth[subject] == nil {
				depth[subject] = map[string]int{}
			}
			depth[subject][s.ID] = d
		}
		return nil
	})
	if err != nil {
		return nil, c.d.Translate(fmt.Errorf("read relations: %w", err))
	}
	bySummary := func(a, b clasp.IssueSummary) int { return cmpIdent(a.Identifier, b.Identifier) }
	for subject, r := range out {
		slices.SortFunc(r.BlockedBy, bySummary)
		slices.SortFunc(r.Blocks, bySummary)
		slices.SortFunc(r.Ancestors, func(a, b clasp.IssueSummary) int {
			return cmp.Compare(depth[subject][a.ID], depth[subject][b.ID])
		})
		r.UnresolvedBlockerIssueIDs = []string{}
		for _, b := range r.BlockedBy {
			if b.Status != clasp.IssueDone {
				r.UnresolvedBlockerIssueIDs = append(r.UnresolvedBlockerIssueIDs, b.ID)
			}
		}
	}
	return out, nil
}

// DepCountsMismatch recomputes the counts of every issue of companyID
// from the edges and the children (statement DepCountsCheck, D10) and
// describes each issue whose maintained counts differ; none when all
// agree. For tests and verification.
func (c CRUD) DepCountsMismatch(ctx context.Context, companyID string) ([]string, error) {
	rows, err := c.d.Read().Query(ctx, "DepCountsCheck", Args{"company": companyID})
	if err != nil {
		return nil, c.d.Translate(fmt.Errorf("check dependency counts: %w", err))
	}
	var out []string
	err = eachRow(rows, func(sc Row) error {
		var (
			id                              string
			ub, oc, rc, wantU, wantO, wantR int
		)
		if err := sc.Scan(&id, &ub, &oc, &rc, &wantU, &wantO, &wantR); err != nil {
			return err
		}
		out = append(out, fmt.Sprintf("issue %s: unresolved_blocker_count %d (recomputed %d), open_child_count %d (recomputed %d), relation_count %d (recomputed %d)",
			id, ub, wantU, oc, wantO, rc, wantR))
		return nil
	})
	return out, c.d.Translate(err)
}

// ApplyPatchDeps applies the edge changes of PATCH p (BlockedByIssueIDs,
// ParentID; nothing when both are nil) on q, the PATCH's write
// transaction, before its Patch statement (D5): the issue is read by
// p.Ref within the actor's scope (statement IssueGet; 404 not_found), its
// company scopes the references. Errors: those of ApplyDeps.
func ApplyPatchDeps(ctx context.Context, q Querier, d Driver, p *IssueUpdateParams) error {
	if p.BlockedByIssueIDs == nil && p.ParentID == nil {
		return nil
	}
	rid, rident := SplitRef(p.Ref)
	iss, err := ScanIssue(q.QueryRow(ctx, "IssueGet", Args{"rid": rid, "rident": rident, "company": Scope(p.Actor)}))
	if d.NoRows(err) {
		return ErrNotFound("issue", p.Ref)
	}
	if err != nil {
		return fmt.Errorf("get issue %s: %w", p.Ref, err)
	}
	return ApplyDeps(ctx, q, d, &DepChange{CompanyID: iss.CompanyID, IssueID: iss.ID, Identifier: iss.Identifier,
		Blockers: p.BlockedByIssueIDs, Parent: p.ParentID, Actor: p.Actor})
}

// ApplyCreateDeps applies the edges of new issue iss (creation p: its
// ParentID and BlockedByIssueIDs) on q, the creating transaction, and
// returns the issue as it then stands (statement IssueGet). An issue
// created in_progress or done with a blocker not done is refused: 422
// blocked_by_unresolved (D2), and the caller rolls the creation back.
// Errors: those of ApplyDeps.
func ApplyCreateDeps(ctx context.Context, q Querier, d Driver, iss *clasp.Issue, p *IssueCreateParams) (*clasp.Issue, error) {
	if len(p.BlockedByIssueIDs) == 0 && p.ParentID == "" {
		return iss, nil
	}
	c := &DepChange{CompanyID: iss.CompanyID, IssueID: iss.ID, Identifier: iss.Identifier, Actor: p.Actor}
	if len(p.BlockedByIssueIDs) > 0 {
		c.Blockers = &p.BlockedByIssueIDs
	}
	if p.ParentID != "" {
		c.Parent = &p.ParentID
	}
	if err := ApplyDeps(ctx, q, d, c); err != nil {
		return nil, err
	}
	out, err := ScanIssue(q.QueryRow(ctx, "IssueGet", Args{"rid": iss.ID, "rident": "", "company": ""}))
	if err != nil {
		return nil, fmt.Errorf("get issue %s: %w", iss.ID, err)
	}
	if out.UnresolvedBlockerCount > 0 && (out.Status == clasp.IssueInProgress || out.Status == clasp.IssueDone) {
		// The create is rolled back: the message names the blockers and
		// the status, not the identifier the new issue would have had.
		ids, names, err := unresolvedBlockers(ctx, q, out.ID)
		if err != nil {
			return nil, err
		}
		return nil, clasp.Errorf(clasp.CodeBlockedByUnresolved,
			"A new issue cannot start as %s while it is blocked by unresolved issues: %s; create it as todo (or backlog), or leave those out of blockedByIssueIds.",
			out.Status, strings.Join(names, ", ")).WithDetails("field", "status", "unresolvedBlockerIssueIds", ids)
	}
	return out, nil
}
