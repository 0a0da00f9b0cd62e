package httpapi

import (
	"context"
	"net/http"
	"time"

	"github.com/clasp-dev/clasp"
	"github.com/clasp-dev/clasp/internal/store"
)

// heartbeatContextComments is how many of the newest comments the
// heartbeat context carries; older ones are read with the comment list
// (after, cursor).
const heartbeatContextComments = 20

// heartbeatContextOut is the answer of GET /api/issues/{id}/heartbeat-context:
// Paperclip's shape (issue, ancestors, project, goal, commentCursor,
// wakeComment), where clasp, which has no projects or goals, answers
// null, plus what clasp adds: the newest comments, the run and what the
// caller may do next. Ancestors are the parent first, up to the top ([]
// for a top-level issue); the issue carries its blockers and readiness.
type heartbeatContextOut struct {
	Issue          hbIssue              `json:"issue"`
	Ancestors      []clasp.IssueSummary `json:"ancestors"`
	Project        any                  `json:"project"`
	Goal           any                  `json:"goal"`
	CommentCursor  hbCommentCursor      `json:"commentCursor"`
	WakeComment    *clasp.Comment       `json:"wakeComment"`
	Comments       []*clasp.Comment     `json:"comments"` // newest first, at most heartbeatContextComments
	Run            *clasp.Run           `json:"run"`      // the caller's run (an agent), the issue's executing run (the board), or null
	AllowedActions hbActions            `json:"allowedActions"`
}

// hbIssue is the issue as clasp has it, with Paperclip's fields clasp does
// not model set to null (so an agent reading them finds them).
type hbIssue struct {
	*clasp.Issue
	ProjectID      *string `json:"projectId"`
	GoalID         *string `json:"goalId"`
	AssigneeUserID *string `json:"assigneeUserId"`
}

// hbCommentCursor names the newest comment (both null without comments):
// an agent reads newer ones later with ?after=latestCommentId&order=asc.
type hbCommentCursor struct {
	LatestCommentID *string    `json:"latestCommentId"`
	LatestCommentAt *time.Time `json:"latestCommentAt"`
}

// hbActions says which writes the caller may make on the issue now, by
// the lock rules (RULES.md, Lock rules), and why not when it may not check out.
// They are a reading of the state at the time of the answer; the writes
// re-check everything.
type hbActions struct {
	Checkout bool `json:"checkout"` // rule L1 would let the caller (in its run) take the issue
	Release  bool `json:"release"`  // rule L4: the caller's run holds it, or adopts a dead holder; the board always
	Update   bool `json:"update"`   // rule L5: a PATCH would not answer ownership_conflict
	Comment  bool `json:"comment"`  // comments are open to every agent of the company and the board
	// Reason explains a false Checkout: run_required, closed,
	// assigned_to_other_agent, held_by_live_run, blocked_by_unresolved
	// (a blocker is not done; RULES.md, Dependencies); "" when Checkout
	// is true.
	Reason string `json:"reason"`
}

// heartbeatContext: GET /api/issues/{id}/heartbeat-context?wakeCommentId=
// (board, or an agent of the issue's company; read-only, Paperclip's
// route): what an agent reads at the start of a heartbeat. 404 for an
// issue not visible to the caller; a wakeCommentId that is no comment of
// the issue gives wakeComment null, as in Paperclip, and one that is not a
// UUID 400 invalid_request naming it (uuidParam).
func (s *Server) heartbeatContext(ctx context.Context, c *call) (int, any, error) {
	wakeID, err := uuidParam(c.r.URL.Query(), "wakeCommentId", "a comment id (a UUID)")
	if err != nil {
		return 0, nil, err
	}
	iss, err := s.st.IssueGet(ctx, c.scope(), issueRef(c))
	if err != nil {
		return 0, nil, err
	}
	cs, err := s.st.CommentList(ctx, &store.CommentListParams{Ref: iss.ID, CompanyID: c.scope(), Desc: true, Limit: heartbeatContextComments})
	if err != nil {
		return 0, nil, err
	}
	out := &heartbeatContextOut{Issue: hbIssue{Issue: iss}, Ancestors: []clasp.IssueSummary{}, Comments: list(cs)}
	if len(cs) > 0 {
		out.CommentCursor = hbCommentCursor{LatestCommentID: &cs[0].ID, LatestCommentAt: &cs[0].CreatedAt}
	}
	if wakeID != "" {
		wc, err := s.st.CommentGet(ctx, c.scope(), iss.ID, wakeID)
		if err != nil && clasp.ErrorCode(err) != clasp.CodeNotFound {
			return 0, nil, err
		}
		out.WakeComment = wc
	}
	// The holder's run decides L1, L4 and L5: live or dead.
	var holder *clasp.Run
	if iss.CheckoutRunID != nil {
		if c.run != nil && c.run.ID == *iss.CheckoutRunID {
			holder = c.run
		} else if holder, err = s.st.RunGet(ctx, *iss.CheckoutRunID); err != nil && clasp.ErrorCode(err) != clasp.CodeNotFound {
			return 0, nil, err
		}
	}
	if c.who.board {
		if iss.ExecutionRunID != nil {
			if holder != nil && holder.ID == *iss.ExecutionRunID {
				out.Run = holder
			} else if out.Run, err = s.st.RunGet(ctx, *iss.ExecutionRunID); err != nil && clasp.ErrorCode(err) != clasp.CodeNotFound {
				return 0, nil, err
			}
		}
	} else {
		out.Run = c.run
	}
	out.AllowedActions = allowedActions(c, iss, holder, s.now())
	return http.StatusOK, out, nil
}

// allowedActions reads the lock rules for the caller on iss, whose checkout
// holder is holder (nil when unlocked or the run is missing), at now.
func allowedActions(c *call, iss *clasp.Issue, holder *clasp.Run, now time.Time) hbActions {
	a := hbActions{Comment: true}
	locked := iss.CheckoutRunID != nil
	liveHolder := holder != nil && holder.Live(now)
	if c.who.board {
		a.Release, a.Update = true, true
		switch {
		case iss.Status.Closed():
			a.Reason = "closed"
		case liveHolder:
			a.Reason = "held_by_live_run"
		case iss.Status != clasp.IssueInProgress && iss.UnresolvedBlockerCount > 0:
			a.Reason = "blocked_by_unresolved"
		default:
			a.Checkout = true
		}
		return a
	}
	me := c.who.agent.ID
	mine := locked && c.run != nil && *iss.CheckoutRunID == c.run.ID
	assignedToMe := iss.AssigneeAgentID != nil && *iss.AssigneeAgentID == me
	switch {
	case c.run == nil:
		a.Reason = "run_required"
	case iss.Status.Closed():
		a.Reason = "closed"
	case iss.AssigneeAgentID != nil && !assignedToMe:
		a.Reason = "assigned_to_other_agent"
	case locked && !mine && liveHolder:
		a.Reason = "held_by_live_run"
	case iss.Status != clasp.IssueInProgress && iss.UnresolvedBlockerCount > 0:
		a.Reason = "blocked_by_unresolved"
	default:
		a.Checkout = true
	}
	a.Release = c.run != nil && (mine || (locked && !liveHolder && assignedToMe))
	a.Update = c.run != nil && (!locked || mine || !liveHolder)
	return a
}
