package httpapi

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/clasp-dev/clasp"
	"github.com/clasp-dev/clasp/internal/metrics"
	"github.com/clasp-dev/clasp/internal/store"
)

// issueRef returns the {id} of an issue route: a UUID or an identifier
// (prepare refused the request unless it has that shape, validIssueRef).
func issueRef(c *call) string { return c.r.PathValue("id") }

// scope returns the company the caller's lookups are limited to: an
// agent's, a company-scoped operator's, "" for an operator of every
// company.
func (c *call) scope() string { return c.who.company() }

// issueCreateIn is the body of POST /api/companies/{companyId}/issues.
type issueCreateIn struct {
	Title           *string            `json:"title"`
	Description     *string            `json:"description"`
	Status          *clasp.IssueStatus `json:"status"`
	Priority        *clasp.Priority    `json:"priority"`
	AssigneeAgentID *string            `json:"assigneeAgentId"`
	// ParentID and BlockedByIssueIDs are issue refs (UUIDs or
	// identifiers) of the same company (RULES.md, Dependencies).
	ParentID          *string  `json:"parentId"`
	BlockedByIssueIDs []string `json:"blockedByIssueIds"`
	// IdempotencyKey is Paperclip's body form of the Idempotency-Key header.
	IdempotencyKey *string `json:"idempotencyKey"`
}

func (in *issueCreateIn) compatFields() map[string]compatField { return issueCompat }

func (in *issueCreateIn) validate() error {
	if err := firstErr(
		requiredText("title", in.Title, maxTitleLen),
		optionalText("description", in.Description, maxDescriptionLen),
		issueStatus("status", in.Status),
		priority("priority", in.Priority),
		uuidField("assigneeAgentId", in.AssigneeAgentID),
		issueRefField("parentId", in.ParentID),
		blockerRefs(in.BlockedByIssueIDs),
	); err != nil {
		return err
	}
	if in.Status != nil && *in.Status == clasp.IssueInProgress && in.AssigneeAgentID == nil {
		return clasp.Errorf(clasp.CodePreconditionFailed, "An issue can be in_progress only with an assignee.").WithDetails("field", "status")
	}
	return nil
}

// issueCreate: POST /api/companies/{companyId}/issues (board, or an agent of
// the company). 201 issue with the next identifier PREFIX-N. Agents never
// create an issue in_progress (422, rule L5: that takes a checkout). A
// repeat with the same Idempotency-Key answers the issue created first, as
// it is now.
func (s *Server) issueCreate(ctx context.Context, c *call, in *issueCreateIn) (int, any, error) {
	if !c.who.board && in.Status != nil && *in.Status == clasp.IssueInProgress {
		return 0, nil, errAgentInProgress()
	}
	if err := bodyIdempotencyKey(c, in.IdempotencyKey); err != nil {
		return 0, nil, err
	}
	charge, err := s.admitCreate(c, "this issue is")
	if err != nil {
		return 0, nil, err
	}
	cid := pathUUID(c, "companyId")
	p := &store.IssueCreateParams{CompanyID: cid, Title: *in.Title, Actor: c.actor(), Idempotency: c.idem}
	if in.Description != nil {
		p.Description = *in.Description
	}
	if in.Status != nil {
		p.Status = *in.Status
	}
	if in.Priority != nil {
		p.Priority = *in.Priority
	}
	if in.AssigneeAgentID != nil {
		p.AssigneeAgentID = *in.AssigneeAgentID
	}
	if in.ParentID != nil {
		p.ParentID = *in.ParentID
	}
	p.BlockedByIssueIDs = in.BlockedByIssueIDs
	iss, err := s.st.IssueCreate(ctx, p)
	if err != nil {
		return 0, nil, err // only rows created count
	}
	charge()
	if p.ParentID != "" {
		s.nudgeDependencies() // a parent whose children were all closed has an open one again
	}
	return http.StatusCreated, iss, nil
}

// bodyIdempotencyKey honours Paperclip's idempotencyKey body field as the
// Idempotency-Key header (RULES.md, Errors and requests): with no header, key (when not
// nil) becomes the request's key. 400 invalid_request when both are sent
// and differ, or for a key the header would refuse.
func bodyIdempotencyKey(c *call, key *string) error {
	if key == nil {
		return nil
	}
	if c.idem != nil {
		if c.idem.Key != *key {
			return clasp.InvalidField("idempotencyKey", "Field \"idempotencyKey\" and the Idempotency-Key header differ; send one, or the same key in both.")
		}
		return nil
	}
	p, err := idempotencyParams(c, *key)
	if err != nil {
		return clasp.InvalidField("idempotencyKey", "Field \"idempotencyKey\" must be 1 to %d printable ASCII characters.", maxIdempotencyKey)
	}
	c.idem = p
	return nil
}

func errAgentInProgress() error {
	return clasp.Errorf(clasp.CodePreconditionFailed, "An agent never sets in_progress directly: check the issue out, which takes the lock in the same write.").
		WithDetails("field", "status")
}

// issueList: GET /api/companies/{companyId}/issues?status=a,b&assigneeAgentId=&q=&ready=&parentId=&limit=&cursor=
// (board, or an agent of the company), newest first. assigneeAgentId=none
// (or unassigned=true) lists unassigned issues; ready=true only issues
// whose blockers are all done; parentId only the children of that issue.
func (s *Server) issueList(ctx context.Context, c *call) (int, any, error) {
	q := c.r.URL.Query()
	page, err := pageParams(q)
	if err != nil {
		return 0, nil, err
	}
	// each filter once: which of two values would win is a guess
	for _, name := range []string{"q", "status", "unassigned", "ready"} {
		if n := len(q[name]); n > 1 {
			return 0, nil, clasp.InvalidField(name, "Query parameter %s is given %d times; give it once (several statuses go in one, as status=todo,in_progress).", name, n)
		}
	}
	p := &store.IssueListParams{Page: page, Query: q.Get("q")}
	if err := maxText("q", p.Query, maxTitleLen); err != nil {
		return 0, nil, err
	}
	if v := q.Get("status"); v != "" {
		for _, part := range strings.Split(v, ",") {
			st := clasp.IssueStatus(strings.TrimSpace(part))
			if !st.Valid() {
				return 0, nil, clasp.InvalidField("status", "Query parameter status lists issue statuses (backlog, todo, in_progress, in_review, blocked, done, cancelled), not %q.", truncate(part, 64))
			}
			p.Statuses = append(p.Statuses, st)
		}
	}
	switch v := q.Get("assigneeAgentId"); v {
	case "none", "null":
		p.Unassigned = true
	default:
		if p.AssigneeAgentID, err = uuidParam(q, "assigneeAgentId", `an agent id (a UUID) or "none"`); err != nil {
			return 0, nil, err
		}
	}
	switch v := q.Get("unassigned"); v {
	case "", "false":
	case "true":
		p.Unassigned = true
	default:
		return 0, nil, clasp.InvalidField("unassigned", "Query parameter unassigned must be true or false.")
	}
	if p.Unassigned && p.AssigneeAgentID != "" {
		return 0, nil, clasp.InvalidField("assigneeAgentId", "Ask for unassigned issues or for one assignee, not both.")
	}
	if p.ParentID, err = s.parentParam(ctx, c, q); err != nil {
		return 0, nil, err
	}
	switch v := q.Get("ready"); v {
	case "", "false":
	case "true":
		p.Ready = true
	default:
		return 0, nil, clasp.InvalidField("ready", "Query parameter ready must be true (only issues whose blockers are all done) or false.")
	}
	if p.CompanyID, err = s.companyID(ctx, c); err != nil {
		return 0, nil, err
	}
	items, next, err := s.st.IssueList(ctx, p)
	if err != nil {
		return 0, nil, err
	}
	setNextLink(c, "cursor", next)
	return http.StatusOK, list(items), nil
}

// parentParam reads issueList's parentId filter: "" when absent or empty,
// else the id of the issue it names by id or by identifier (ACME-12),
// within the caller's scope; an identifier that names no issue of the
// company the caller may see gives noParent, which matches no issue (a
// well-formed id that names nothing filters to no rows, as a UUID does).
// 400 invalid_request naming parentId when it is given twice or is
// neither.
func (s *Server) parentParam(ctx context.Context, c *call, q url.Values) (string, error) {
	if n := len(q["parentId"]); n > 1 {
		return "", clasp.InvalidField("parentId", "Query parameter parentId is given %d times; give it once.", n)
	}
	v := q.Get("parentId")
	if v == "" {
		return "", nil
	}
	if id, ok := parseUUID(v); ok {
		return id, nil
	}
	if !validIssueRef(v) {
		return "", clasp.InvalidField("parentId", "Query parameter parentId must be an issue id (a UUID) or identifier (such as ACME-12), not %q.", truncate(v, 64))
	}
	iss, err := s.st.IssueGet(ctx, c.scope(), v)
	if clasp.ErrorCode(err) == clasp.CodeNotFound || (err == nil && iss.CompanyID != pathUUID(c, "companyId")) {
		return noParent, nil
	}
	if err != nil {
		return "", err
	}
	return iss.ID, nil
}

// noParent is a parentId filter no issue matches: the nil UUID, which no
// issue has.
const noParent = "00000000-0000-0000-0000-000000000000"

// issueGet: GET /api/issues/{id} (UUID or identifier, case-insensitive).
// 404 not_found, also for another company's issue.
func (s *Server) issueGet(ctx context.Context, c *call) (int, any, error) {
	ref := issueRef(c)
	iss, err := s.st.IssueGet(ctx, c.scope(), ref)
	if err != nil {
		return 0, nil, err
	}
	return http.StatusOK, iss, nil
}

// issueUpdateIn is the body of PATCH /api/issues/{id}. AssigneeAgentID and
// Description are raw so that null (unassign, clear) differs from absent.
type issueUpdateIn struct {
	Title           *string            `json:"title"`
	Description     json.RawMessage    `json:"description"`
	Status          *clasp.IssueStatus `json:"status"`
	Priority        *clasp.Priority    `json:"priority"`
	AssigneeAgentID json.RawMessage    `json:"assigneeAgentId"`
	Comment         *string            `json:"comment"`
	// ParentID is raw so that null (make the issue top-level) differs
	// from absent; BlockedByIssueIDs, when present, replaces the blockers
	// (null or [] removes them all).
	ParentID          json.RawMessage `json:"parentId"`
	BlockedByIssueIDs json.RawMessage `json:"blockedByIssueIds"`
	// IdempotencyKey is Paperclip's body form of the Idempotency-Key header.
	IdempotencyKey *string `json:"idempotencyKey"`

	parent      *string   // decoded ParentID: nil absent, "" top-level, else a ref
	blockers    *[]string // decoded BlockedByIssueIDs: nil absent, else the new list
	assignee    *string   // decoded AssigneeAgentID: nil absent, "" unassign, else a UUID
	description *string   // decoded Description: nil absent, "" for null (clear), else the text
	compat      []string  // Paperclip fields the body carried (accepted, unmodelled)
	noop        bool      // the body carries only accepted Paperclip fields: nothing to write
}

func (in *issueUpdateIn) compatFields() map[string]compatField { return issueUpdateCompat }
func (in *issueUpdateIn) noteCompat(keys []string)             { in.compat = keys }

// issueReadOnly are the issue fields a PATCH may never set (rule L5:
// lock columns are never writable; scenario S18).
var issueReadOnly = map[string]bool{
	"id": true, "companyId": true, "identifier": true,
	"checkoutRunId": true, "checkoutEpoch": true, "executionRunId": true,
	"executionAgentNameKey": true, "executionLockedAt": true,
	"startedAt": true, "completedAt": true, "cancelledAt": true,
	"createdAt": true, "updatedAt": true,
}

func (in *issueUpdateIn) readOnlyField(name string) bool { return issueReadOnly[name] }

// issueNonNull are the issue PATCH fields that have no null (description
// and assigneeAgentId do: null clears them).
var issueNonNull = map[string]string{
	"title":    "a non-empty string",
	"status":   "one of backlog, todo, in_progress, in_review, blocked, done, cancelled",
	"priority": "one of critical, high, medium, low",
	"comment":  "a non-empty string",
}

func (in *issueUpdateIn) nonNullField(name string) (string, bool) {
	takes, ok := issueNonNull[name]
	return takes, ok
}

func (in *issueUpdateIn) validate() error {
	if in.Title != nil {
		if err := requiredText("title", in.Title, maxTitleLen); err != nil {
			return err
		}
	}
	if in.Description != nil {
		var v *string
		if err := json.Unmarshal(in.Description, &v); err != nil {
			return clasp.InvalidField("description", "Field \"description\" must be a string, or null to clear it.")
		}
		if v == nil {
			v = new(string)
		}
		in.description = v
	}
	if err := firstErr(
		optionalText("description", in.description, maxDescriptionLen),
		issueStatus("status", in.Status),
		priority("priority", in.Priority),
	); err != nil {
		return err
	}
	if in.Comment != nil {
		if err := requiredText("comment", in.Comment, maxCommentLen); err != nil {
			return err
		}
	}
	if in.AssigneeAgentID != nil {
		var v *string
		if err := json.Unmarshal(in.AssigneeAgentID, &v); err != nil {
			return clasp.InvalidField("assigneeAgentId", "Field \"assigneeAgentId\" must be an agent id (a UUID) or null.")
		}
		if v == nil {
			empty := ""
			in.assignee = &empty
		} else {
			if err := uuidField("assigneeAgentId", v); err != nil {
				return err
			}
			in.assignee = v
		}
	}
	if in.ParentID != nil {
		var v *string
		if err := json.Unmarshal(in.ParentID, &v); err != nil {
			return clasp.InvalidField("parentId", "Field \"parentId\" must be an issue id or identifier, or null to make the issue top-level.")
		}
		if v == nil {
			v = new(string)
		} else if err := issueRefField("parentId", v); err != nil {
			return err
		}
		in.parent = v
	}
	if in.BlockedByIssueIDs != nil {
		var v []string
		if err := json.Unmarshal(in.BlockedByIssueIDs, &v); err != nil {
			return clasp.InvalidField("blockedByIssueIds", "Field \"blockedByIssueIds\" must be a list of issue ids or identifiers, or null to remove every blocker.")
		}
		if err := blockerRefs(v); err != nil {
			return err
		}
		if v == nil {
			v = []string{}
		}
		in.blockers = &v
	}
	if in.Title == nil && in.description == nil && in.Status == nil && in.Priority == nil && in.assignee == nil && in.Comment == nil &&
		in.parent == nil && in.blockers == nil {
		if len(in.compat) > 0 {
			in.noop = true
			return nil
		}
		return clasp.Errorf(clasp.CodeInvalidRequest, "The body changes nothing: send title, description, status, priority, assigneeAgentId, parentId, blockedByIssueIds or comment.")
	}
	return nil
}

// issueUpdate: PATCH /api/issues/{id} (rules L5, L6). Agents need their run:
// while the issue is in_progress and locked, only the holding run (or one
// adopting a dead holder) may write (409 ownership_conflict otherwise), and
// an agent never sets in_progress (422). comment is written in the same
// transaction. With an Idempotency-Key (RULES.md, Errors and requests: agents retry after
// network errors) a repeat of the same PATCH writes nothing and answers the
// issue as it is now, with Idempotent-Replayed: true; the same key with
// another body: 422 idempotency_key_reused. 200 issue.
func (s *Server) issueUpdate(ctx context.Context, c *call, in *issueUpdateIn) (int, any, error) {
	ref := issueRef(c)
	if err := s.checkIssueVisible(ctx, c, ref); err != nil {
		return 0, nil, err
	}
	if !c.who.board && in.Status != nil && *in.Status == clasp.IssueInProgress {
		return 0, nil, errAgentInProgress()
	}
	if err := bodyIdempotencyKey(c, in.IdempotencyKey); err != nil {
		return 0, nil, err
	}
	if in.noop {
		// Only Paperclip fields at their defaults: the issue as it is.
		iss, err := s.st.IssueGet(ctx, c.scope(), ref)
		if err != nil {
			return 0, nil, err
		}
		return http.StatusOK, iss, nil
	}
	iss, err := s.st.IssueUpdate(ctx, &store.IssueUpdateParams{
		Ref: ref, Title: in.Title, Description: in.description, Status: in.Status,
		Priority: in.Priority, AssigneeAgentID: in.assignee, ParentID: in.parent, BlockedByIssueIDs: in.blockers,
		Comment: in.Comment, Actor: c.actor(), Idempotency: c.idem,
	})
	if err != nil {
		return 0, nil, err
	}
	if nudgeAfterUpdate(in.Status != nil, in.parent != nil || in.blockers != nil, iss) {
		s.nudgeDependencies() // dependents or a parent may be ready now
	}
	return http.StatusOK, iss, nil
}

// nudgeAfterUpdate reports whether a PATCH of issue iss (the answer after
// the write) may have made a dependency wake due (RULES.md D8), so that
// the dependency-wake pass should run at once: when it set the parent or
// the blockers (edges), or set a status (statusSet) of an issue with a
// parent (whose children state it moves) or with an edge (whose
// dependents' ready state it moves). A status change of an issue with
// neither makes nothing due: at a thousand such writes a second, a pass
// after each would cost more than the writes. A wake missed by this test
// (an edge added by a concurrent write) is not lost: that write nudges
// itself, and the regular pass makes up any nudge.
func nudgeAfterUpdate(statusSet, edgesSet bool, iss *clasp.Issue) bool {
	if edgesSet {
		return true
	}
	return statusSet && iss != nil && (iss.ParentID != nil || iss.RelationCount > 0)
}

// checkoutIn is the body of POST /api/issues/{id}/checkout (rule L1).
type checkoutIn struct {
	AgentID          *string             `json:"agentId"`
	ExpectedStatuses []clasp.IssueStatus `json:"expectedStatuses"`
}

func (in *checkoutIn) validate() error {
	if in.AgentID == nil {
		return clasp.InvalidField("agentId", "Field \"agentId\" is required: the id of the agent checking out.")
	}
	if err := uuidField("agentId", in.AgentID); err != nil {
		return err
	}
	if _, err := store.ValidateExpected(in.ExpectedStatuses, "checkout"); err != nil {
		return err
	}
	return nil
}

// issueCheckout: POST /api/issues/{id}/checkout (rules L1-L3). An agent
// checks out for itself (403 agent_mismatch otherwise) in its live run; the
// board assigns agentId and sets in_progress without a lock (S12). 200
// issue; 409 checkout_conflict with the holder in details; 404 for an
// issue not visible to the caller.
func (s *Server) issueCheckout(ctx context.Context, c *call, in *checkoutIn) (status int, v any, err error) {
	ref := issueRef(c)
	if err := s.checkIssueVisible(ctx, c, ref); err != nil {
		return 0, nil, err
	}
	var res store.CheckoutResult
	defer func() { s.countCheckout(&res, err) }()
	if err := refusePaused(c, "check out issues"); err != nil {
		return 0, nil, err
	}
	if !c.who.board && *in.AgentID != c.who.agent.ID {
		return 0, nil, store.ErrAgentMismatch(c.who.agent.ID, *in.AgentID)
	}
	tmpl, prefix, err := s.grantTemplate(ctx, c)
	if err != nil {
		return 0, nil, err
	}
	iss, err := s.st.IssueCheckout(ctx, &store.IssueCheckoutParams{
		Ref: ref, AgentID: *in.AgentID, ExpectedStatuses: in.ExpectedStatuses, LeaseTTL: s.lease, Actor: c.actor(),
		Result: &res,
	})
	if err != nil {
		return 0, nil, err
	}
	return http.StatusOK, withWorkspace(c, iss, tmpl, prefix), nil
}

// countCheckout records a checkout's outcome as the store reported it:
// same run again (rule L2), adoption of a dead holder (rule L3), conflict
// by reason, or error.
func (s *Server) countCheckout(res *store.CheckoutResult, err error) {
	if err != nil {
		if e := clasp.AsError(err); e != nil && e.Code == clasp.CodeCheckoutConflict {
			s.m.Checkouts.WithLabelValues(metrics.OutcomeConflict).Inc()
			reason, _ := e.Details["reason"].(string)
			if reason == "" {
				reason = "unknown"
			}
			s.m.CheckoutConflicts.WithLabelValues(reason).Inc()
			return
		}
		s.m.Checkouts.WithLabelValues(metrics.OutcomeError).Inc()
		return
	}
	if res.SameRun {
		s.m.Checkouts.WithLabelValues(metrics.OutcomeSameRun).Inc()
		return
	}
	if res.AdoptedWhy != "" {
		s.m.LockAdoptions.Inc()
	}
	s.m.Checkouts.WithLabelValues(metrics.OutcomeOK).Inc()
}

// releaseIn is the body of POST /api/issues/{id}/release (rule L4).
type releaseIn struct {
	Unassign bool `json:"unassign"`
}

// releaseCompat: Paperclip's release ignores its body; its clients may send
// {"force": false}.
var releaseCompat = map[string]compatField{
	"force": {concept: "clasp has no forced release by a run (the board uses POST /api/issues/{id}/admin/force-release)", def: "false"},
}

func (in *releaseIn) compatFields() map[string]compatField { return releaseCompat }

// issueRelease: POST /api/issues/{id}/release (rule L4): the holding run,
// a live run of the assignee when the holder is dead, or the board. Locks
// cleared, in_progress becomes todo, the assignee kept unless unassign.
// 200 issue (also when there was no lock); 409 ownership_conflict.
func (s *Server) issueRelease(ctx context.Context, c *call, in *releaseIn) (int, any, error) {
	ref := issueRef(c)
	if err := s.checkIssueVisible(ctx, c, ref); err != nil {
		return 0, nil, err
	}
	iss, err := s.st.IssueRelease(ctx, &store.IssueReleaseParams{Ref: ref, Unassign: in.Unassign, Actor: c.actor()})
	if err != nil {
		return 0, nil, err
	}
	return http.StatusOK, iss, nil
}

// forceReleaseIn is the body of POST /api/issues/{id}/admin/force-release.
type forceReleaseIn struct {
	Reason        *string `json:"reason"`
	ClearAssignee bool    `json:"clearAssignee"`
}

func (in *forceReleaseIn) validate() error {
	return requiredText("reason", in.Reason, maxReasonLen)
}

// issueForceRelease: POST /api/issues/{id}/admin/force-release (board):
// clears every lock whoever holds it, audited with
// issue.admin_force_release {previousCheckoutRunId, previousExecutionRunId, reason}.
func (s *Server) issueForceRelease(ctx context.Context, c *call, in *forceReleaseIn) (int, any, error) {
	ref := issueRef(c)
	if err := s.checkIssueVisible(ctx, c, ref); err != nil {
		return 0, nil, err
	}
	iss, err := s.st.IssueForceRelease(ctx, &store.IssueForceReleaseParams{Ref: ref, Reason: *in.Reason, ClearAssignee: in.ClearAssignee, Actor: c.actor()})
	if err != nil {
		return 0, nil, err
	}
	return http.StatusOK, iss, nil
}

// commentCreateIn is the body of POST /api/issues/{id}/comments.
// AuthorType is Paperclip's: the author is always the caller, so it may
// only name the caller's own kind (checked by commentCreate).
type commentCreateIn struct {
	Body           *string `json:"body"`
	AuthorType     *string `json:"authorType"`
	IdempotencyKey *string `json:"idempotencyKey"`
}

func (in *commentCreateIn) compatFields() map[string]compatField { return commentCompat }

func (in *commentCreateIn) validate() error {
	return requiredText("body", in.Body, maxCommentLen)
}

// commentCreate: POST /api/issues/{id}/comments (board, or any agent of the
// issue's company, with its run if it names one). 201 comment; a repeat
// with the same Idempotency-Key answers the comment created first.
func (s *Server) commentCreate(ctx context.Context, c *call, in *commentCreateIn) (int, any, error) {
	ref := issueRef(c)
	if err := s.checkIssueVisible(ctx, c, ref); err != nil {
		return 0, nil, err
	}
	if in.AuthorType != nil {
		own := map[bool]map[string]bool{true: {"user": true, "board": true}, false: {"agent": true}}[c.who.board]
		if !own[*in.AuthorType] {
			return 0, nil, clasp.InvalidField("authorType", "clasp takes a comment's author from the credential: field \"authorType\" may only be null or the caller's own kind, not %q.", truncate(*in.AuthorType, 32))
		}
	}
	if err := bodyIdempotencyKey(c, in.IdempotencyKey); err != nil {
		return 0, nil, err
	}
	charge := func() {}
	if !c.who.board {
		// Limits.CommentsPerAgentMinute: one allowance per agent, shared
		// by all its keys and runs. A replayed Idempotency-Key counts too:
		// it is still a request; a comment refused after all does not.
		st, chargeComment := s.comments.admit(c.who.agent.ID, time.Now())
		if !st.ok {
			st.setHeaders(c.w.Header())
			return 0, nil, clasp.Errorf(clasp.CodeRateLimited, "This agent has used up its comment allowance (%d a minute across all its runs and keys, refilled continuously, with a burst of as many); retry after %d s.", s.limits.CommentsPerAgentMinute, max(1, ceilSeconds(st.retry))).
				WithDetails("limit", "comments per agent per minute").WithDetails("retryAfterSeconds", max(1, ceilSeconds(st.retry)))
		}
		chargeCreate, err := s.admitCreate(c, "this comment is")
		if err != nil {
			return 0, nil, err
		}
		charge = func() { chargeComment(); chargeCreate() }
	}
	cm, err := s.st.CommentCreate(ctx, &store.CommentCreateParams{Ref: ref, Body: *in.Body, Actor: c.actor(), Idempotency: c.idem})
	if err != nil {
		return 0, nil, err
	}
	charge()
	return http.StatusCreated, cm, nil
}

// commentList: GET /api/issues/{id}/comments?order=&after=&cursor=&limit=
// newest first (order=desc, the default, as Paperclip) or oldest first
// (order=asc). after (a comment id) keeps only the comments written after
// it, in either order (Paperclip's incremental read); cursor continues
// after a comment in the list's order. Link rel="next" (cursor = the last
// id, the other parameters kept) when the page is full. 400 naming the
// parameter for a bad order, or an after or cursor that is no comment id
// of the issue.
func (s *Server) commentList(ctx context.Context, c *call) (int, any, error) {
	ref := issueRef(c)
	q := c.r.URL.Query()
	page, err := pageParams(q)
	if err != nil {
		return 0, nil, err
	}
	p := &store.CommentListParams{Ref: ref, CompanyID: c.scope(), Limit: page.Limit}
	switch v := q.Get("order"); v {
	case "", "desc":
		p.Desc = true
	case "asc":
	default:
		return 0, nil, clasp.InvalidField("order", "Query parameter order must be asc (oldest first) or desc (newest first, the default), not %q.", truncate(v, 32))
	}
	if p.After, err = uuidParam(q, "after", "a comment id (a UUID)"); err != nil {
		return 0, nil, err
	}
	if p.Cursor, err = uuidParam(q, "cursor", "a comment id (a UUID)"); err != nil {
		return 0, nil, err
	}
	items, err := s.st.CommentList(ctx, p)
	if err != nil {
		return 0, nil, err
	}
	if len(items) > 0 && len(items) >= page.Limit {
		setNextLink(c, "cursor", items[len(items)-1].ID)
	}
	return http.StatusOK, list(items), nil
}

// commentGet: GET /api/issues/{id}/comments/{commentId} (board, or an agent
// of the issue's company): one comment. 404 not_found for an issue not
// visible to the caller, or a comment that is not of that issue.
func (s *Server) commentGet(ctx context.Context, c *call) (int, any, error) {
	ref := issueRef(c)
	id := pathUUID(c, "commentId")
	cm, err := s.st.CommentGet(ctx, c.scope(), ref, id)
	if err != nil {
		return 0, nil, err
	}
	return http.StatusOK, cm, nil
}

// activityFilters reads action and entityId (an entity's UUID: an issue,
// agent, run or company; 400 invalid_request naming it otherwise, as every
// id filter, uuidParam).
func activityFilters(c *call, p *store.ActivityListParams) error {
	q := c.r.URL.Query()
	p.Action = q.Get("action")
	if err := maxText("action", p.Action, maxRefLen); err != nil {
		return err
	}
	var err error
	p.EntityID, err = uuidParam(q, "entityId", "an entity id (a UUID)")
	return err
}

// issueActivity: GET /api/issues/{id}/activity?action=&entityId=&limit=&cursor=,
// newest first: the rows whose entity is the issue. entityId filters them
// as it does a company's activity: the issue's own id keeps them all,
// another entity's id keeps none (an empty list); anything but a UUID is
// 400 invalid_request naming it (activityFilters).
func (s *Server) issueActivity(ctx context.Context, c *call) (int, any, error) {
	ref := issueRef(c)
	page, err := pageParams(c.r.URL.Query())
	if err != nil {
		return 0, nil, err
	}
	p := &store.ActivityListParams{Page: page}
	if err := activityFilters(c, p); err != nil {
		return 0, nil, err
	}
	iss, err := s.st.IssueGet(ctx, c.scope(), ref)
	if err != nil {
		return 0, nil, err
	}
	if p.EntityID != "" && p.EntityID != iss.ID {
		return http.StatusOK, list([]*clasp.Activity(nil)), nil // no row of this issue has another entity
	}
	p.CompanyID, p.EntityID = iss.CompanyID, iss.ID
	items, next, err := s.st.ActivityList(ctx, p)
	if err != nil {
		return 0, nil, err
	}
	setNextLink(c, "cursor", next)
	return http.StatusOK, list(items), nil
}

// companyActivity: GET /api/companies/{companyId}/activity?action=&entityId=&limit=&cursor=
// (board, or an agent of the company), newest first.
func (s *Server) companyActivity(ctx context.Context, c *call) (int, any, error) {
	page, err := pageParams(c.r.URL.Query())
	if err != nil {
		return 0, nil, err
	}
	p := &store.ActivityListParams{Page: page}
	if err := activityFilters(c, p); err != nil {
		return 0, nil, err
	}
	if p.CompanyID, err = s.companyID(ctx, c); err != nil {
		return 0, nil, err
	}
	items, next, err := s.st.ActivityList(ctx, p)
	if err != nil {
		return 0, nil, err
	}
	setNextLink(c, "cursor", next)
	return http.StatusOK, list(items), nil
}
