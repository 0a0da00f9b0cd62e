package cli

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/clasp-dev/clasp"
	"github.com/clasp-dev/clasp/client"
)

func (a *app) newIssueCmd() *cobra.Command {
	g := a.newGroup("issue", "Create, list, check out, release and update issues",
		`Issues are the backlog. An agent run takes an issue with 'checkout' (one
conditional write: it succeeds only if no other live run holds the issue) and
gives it back with 'release', or finishes it with 'update --status done'.
ISSUE is the issue's UUID or its identifier (e.g. ACME-12, any case).

A conflict (the server answers 409, e.g. the issue is held by another live
run) exits with code 3 and names the holder on stderr.`,
		`  clasp issue create "Fix the login page" --company <company-id> --status todo
  clasp issue list --company <company-id> --status todo,in_progress
  CLASP_TOKEN=clasp_rt_... clasp issue checkout ACME-12
  clasp issue update ACME-12 --status done --comment "fixed in 4f2a1c"`)
	g.AddCommand(
		a.newIssueCreateCmd(),
		a.newIssueListCmd(),
		a.newIssueShowCmd(),
		a.newIssueCheckoutCmd(),
		a.newIssueClaimCmd(),
		a.newIssueReleaseCmd(),
		a.newIssueCommentCmd(),
		a.newIssueCommentsCmd(),
		a.newIssueUpdateCmd(),
		a.newIssueForceReleaseCmd(),
	)
	return g
}

// parseIssueStatuses parses a comma-separated list of issue statuses.
func parseIssueStatuses(s string) ([]clasp.IssueStatus, error) {
	var out []clasp.IssueStatus
	for _, p := range strings.Split(s, ",") {
		p = strings.TrimSpace(p)
		if p == "" {
			continue
		}
		st := clasp.IssueStatus(p)
		if !st.Valid() {
			return nil, usageErr(fmt.Errorf("unknown issue status %q (want one of %s)", p, issueStatusList()))
		}
		out = append(out, st)
	}
	return out, nil
}

func issueStatusList() string {
	s := make([]string, len(clasp.IssueStatuses))
	for i, st := range clasp.IssueStatuses {
		s[i] = string(st)
	}
	return strings.Join(s, ", ")
}

// readBody returns s, or standard input when s is "-".
func (a *app) readBody(s string) (string, error) {
	if s != "-" {
		return s, nil
	}
	b, err := io.ReadAll(a.stdin)
	if err != nil {
		return "", fmt.Errorf("read standard input: %w", err)
	}
	return strings.TrimRight(string(b), "\n"), nil
}

func (a *app) newIssueCreateCmd() *cobra.Command {
	var company, description, status, priority, assignee, idemKey, parent string
	var blockedBy []string
	cmd := &cobra.Command{
		Use:   "create TITLE --company COMPANY_ID",
		Short: "Create an issue",
		Long: `Create an issue with the company's next identifier (PREFIX-N). The status
defaults to backlog and the priority to medium. --description - reads the
description from standard input. With --idempotency-key, a repeat of the same
call creates nothing and answers the first issue again (and connection errors
are retried).

--blocked-by lists issues that must be done before this one may enter
in_progress or done; --parent makes it a sub-issue. Both take identifiers
(ACME-3) or ids of the same company; an edge that would close a cycle is
refused.`,
		Example: `  clasp issue create "Fix the login page" --company <company-id> --status todo --priority high
  git log -1 --format=%B | clasp issue create "Follow up" --description - --company <company-id>
  clasp issue create "Ship the release" --company ACME --blocked-by ACME-3,ACME-4 --parent ACME-1`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			blockers, err := blockerFlag(blockedBy)
			if err != nil {
				return err
			}
			req := client.IssueCreateRequest{Title: args[0], AssigneeAgentID: assignee, ParentID: parent, BlockedByIssueIDs: blockers}
			if status != "" {
				req.Status = clasp.IssueStatus(status)
				if !req.Status.Valid() {
					return usageErr(fmt.Errorf("unknown issue status %q (want one of %s)", status, issueStatusList()))
				}
			}
			if priority != "" {
				req.Priority = clasp.Priority(priority)
				if !req.Priority.Valid() {
					return usageErr(fmt.Errorf("unknown priority %q (want critical, high, medium or low)", priority))
				}
			}
			d, err := a.readBody(description)
			if err != nil {
				return err
			}
			req.Description = d
			c := a.client()
			cid, err := a.companyID(ctx, c, company)
			if err != nil {
				return err
			}
			if req.AssigneeAgentID, err = a.resolveAgent(ctx, cid, assignee, "--assignee"); err != nil {
				return err
			}
			if idemKey != "" {
				ctx = client.WithIdempotencyKey(ctx, idemKey)
			}
			iss, err := c.IssueCreate(ctx, cid, req)
			if err != nil {
				return err
			}
			n := a.issueDetailNames(ctx, iss)
			return a.emit(iss, func(w io.Writer) { printIssue(w, iss, n) })
		},
	}
	f := cmd.Flags()
	f.StringVar(&company, "company", "", "company: its id, issue prefix or name (default $"+EnvCompanyID+", or the calling agent's)")
	f.StringVar(&description, "description", "", "description text, or - for standard input")
	f.StringVar(&status, "status", "", "initial status (default backlog)")
	f.StringVar(&priority, "priority", "", "critical, high, medium or low (default medium)")
	f.StringVar(&assignee, "assignee", "", "agent to assign: its id or name")
	f.StringSliceVar(&blockedBy, "blocked-by", nil, "comma-separated issues that must be done first (identifiers or ids)")
	f.StringVar(&parent, "parent", "", "issue this one is a part of (identifier or id)")
	f.StringVar(&idemKey, "idempotency-key", "", "Idempotency-Key header: repeats with the same key create nothing")
	return cmd
}

func (a *app) newIssueListCmd() *cobra.Command {
	var company, status, assignee, query string
	var ready bool
	var lf listFlags
	cmd := &cobra.Command{
		Use:   "list --company COMPANY_ID",
		Short: "List issues, newest first",
		Long: `List a company's issues, newest first. An issue with a blocker that is not
done shows "(waiting on ACME-3)" after its status; --ready lists only the
issues whose blockers are all done.`,
		Example: `  clasp issue list --company <company-id> --status todo,in_progress
  clasp issue list --company <company-id> --query login --all --json
  clasp issue list --company ACME --status todo --ready`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			sts, err := parseIssueStatuses(status)
			if err != nil {
				return err
			}
			c := a.client()
			cid, err := a.companyID(ctx, c, company)
			if err != nil {
				return err
			}
			if assignee, err = a.resolveAgent(ctx, cid, assignee, "--assignee"); err != nil {
				return err
			}
			first, err := c.IssueList(ctx, cid, client.IssueListParams{
				Statuses: sts, AssigneeAgentID: assignee, Query: query, Ready: ready, Limit: lf.limit, Cursor: lf.cursor,
			})
			if err != nil {
				return err
			}
			items, next, err := collect(ctx, first, lf.all)
			if err != nil {
				return err
			}
			var abandoned map[string]bool
			var n *names
			if !a.jsonOut {
				abandoned = abandonedIssues(ctx, c, items)
				n = a.names(0)
				if slices.ContainsFunc(items, func(i *clasp.Issue) bool { return i.AssigneeAgentID != nil }) {
					n.learnAgents(ctx, cid, "")
				}
			}
			return emitList(a, items, next, func(w io.Writer, is []*clasp.Issue) { printIssues(w, is, abandoned, n) })
		},
	}
	f := cmd.Flags()
	f.StringVar(&company, "company", "", "company: its id, issue prefix or name (default $"+EnvCompanyID+", or the calling agent's)")
	f.StringVar(&status, "status", "", "comma-separated statuses to include")
	f.StringVar(&assignee, "assignee", "", "only issues assigned to this agent (id or name)")
	f.StringVar(&query, "query", "", "substring of the title or identifier")
	f.BoolVar(&ready, "ready", false, "only issues whose blockers are all done")
	lf.add(cmd)
	return cmd
}

func (a *app) newIssueShowCmd() *cobra.Command {
	return &cobra.Command{
		Use:     "show ISSUE",
		Short:   "Show an issue with its locks, blockers and readiness",
		Example: "  clasp issue show ACME-12",
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c := a.client()
			iss, err := c.IssueGet(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			parent := optStr(iss.ParentID)
			if iss.ParentID != nil && !a.jsonOut {
				// The answer names the parent by id; a person reads its identifier.
				if p, err := c.IssueGet(cmd.Context(), *iss.ParentID); err == nil {
					parent = p.Identifier + " (" + string(p.Status) + ")"
				}
			}
			n := a.issueDetailNames(cmd.Context(), iss)
			return a.emit(iss, func(w io.Writer) { printIssueParent(w, iss, parent, n) })
		},
	}
}

// defaultExpected are the statuses a checkout accepts unless --expect says
// otherwise.
const defaultExpected = "todo,backlog,blocked"

func (a *app) newIssueCheckoutCmd() *cobra.Command {
	var agent, expect string
	var wait time.Duration
	cmd := &cobra.Command{
		Use:   "checkout ISSUE",
		Short: "Check an issue out for the current run (takes its lock)",
		Long: `Check an issue out for the run you act in: a run token (CLASP_TOKEN=clasp_rt_...)
or an agent key plus --run / CLASP_RUN_ID. It succeeds when the issue is yours
or unassigned, its status is one of --expect (or it is already in_progress and
yours), and no other live run holds it; it then moves to in_progress, is
assigned to you, and its checkout epoch (fencing token) goes up by one.
Checking out again from the same run changes nothing.

Otherwise it exits with code 3 and names the holder. With --wait, a checkout
held by another live run is retried with backoff for up to that long.
The board may check an issue out for an agent (--agent): it is assigned and set
in_progress without a lock.`,
		Example: `  CLASP_TOKEN=clasp_rt_... clasp issue checkout ACME-12
  clasp issue checkout ACME-12 --run <run-id> --expect todo,in_review --wait 30s`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			sts, err := parseIssueStatuses(expect)
			if err != nil {
				return err
			}
			if len(sts) == 0 {
				return usageErr(errors.New("--expect needs at least one status"))
			}
			c := a.client()
			aid, err := a.agentID(ctx, c, agent)
			if err != nil {
				return err
			}
			req := client.CheckoutRequest{AgentID: aid, ExpectedStatuses: sts}
			var iss *clasp.Issue
			if wait > 0 {
				wctx, cancel := context.WithTimeout(ctx, wait)
				defer cancel()
				iss, err = c.CheckoutWithRetry(wctx, args[0], req, client.DefaultBackoff())
			} else {
				iss, err = c.IssueCheckout(ctx, args[0], req)
			}
			if err != nil {
				return err
			}
			return a.emit(iss, func(w io.Writer) {
				fmt.Fprintf(w, "Checked out %s (checkout epoch %d, run %s).\n", iss.Identifier, iss.CheckoutEpoch, optStr(iss.CheckoutRunID))
				printIssue(w, iss, a.issueDetailNames(cmd.Context(), iss))
			})
		},
	}
	f := cmd.Flags()
	f.StringVar(&agent, "agent", "", "agent to check out for, by id or name (default: the calling agent)")
	f.StringVar(&expect, "expect", defaultExpected, "comma-separated statuses the issue may have")
	f.DurationVar(&wait, "wait", 0, "retry while another live run holds it, for up to this long (e.g. 30s)")
	return cmd
}

func (a *app) newIssueReleaseCmd() *cobra.Command {
	var unassign bool
	cmd := &cobra.Command{
		Use:   "release ISSUE",
		Short: "Release an issue's lock (in_progress becomes todo)",
		Long: `Release the lock of an issue your run holds (or whose holder is dead, when
you are its assignee; the board may always release). in_progress becomes todo;
the assignee stays unless --unassign. Releasing an unlocked issue is a no-op.
Another live run's release exits with code 3 (ownership_conflict).`,
		Example: `  clasp issue release ACME-12
  clasp issue release ACME-12 --unassign`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			iss, err := a.client().IssueRelease(cmd.Context(), args[0], client.ReleaseRequest{Unassign: unassign})
			if err != nil {
				return err
			}
			return a.emit(iss, func(w io.Writer) {
				fmt.Fprintf(w, "Released %s (status %s).\n", iss.Identifier, iss.Status)
			})
		},
	}
	cmd.Flags().BoolVar(&unassign, "unassign", false, "clear the assignee as well")
	return cmd
}

func (a *app) newIssueCommentCmd() *cobra.Command {
	var idemKey string
	cmd := &cobra.Command{
		Use:   "comment ISSUE BODY",
		Short: "Add a comment to an issue (BODY - reads standard input)",
		Example: `  clasp issue comment ACME-12 "reproduced on main"
  go test ./... 2>&1 | clasp issue comment ACME-12 -`,
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			body, err := a.readBody(args[1])
			if err != nil {
				return err
			}
			ctx := cmd.Context()
			if idemKey != "" {
				ctx = client.WithIdempotencyKey(ctx, idemKey)
			}
			cm, err := a.client().CommentCreate(ctx, args[0], client.CommentCreateRequest{Body: body})
			if err != nil {
				return err
			}
			n := a.issueNames(ctx, cm.IssueID)
			return a.emit(cm, func(w io.Writer) { printComment(w, cm, n) })
		},
	}
	cmd.Flags().StringVar(&idemKey, "idempotency-key", "", "Idempotency-Key header: repeats with the same key create nothing")
	return cmd
}

func (a *app) newIssueCommentsCmd() *cobra.Command {
	var after string
	var limit int
	cmd := &cobra.Command{
		Use:     "comments ISSUE",
		Short:   "List an issue's comments, oldest first",
		Example: "  clasp issue comments ACME-12 --json",
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			cs, err := a.client().CommentList(cmd.Context(), args[0], client.CommentListParams{After: after, Limit: limit})
			if err != nil {
				return err
			}
			n := a.issueNames(cmd.Context(), args[0])
			return emitList(a, cs, "", func(w io.Writer, cs []*clasp.Comment) { printComments(w, cs, n) })
		},
	}
	cmd.Flags().StringVar(&after, "after", "", "only comments after this comment id")
	cmd.Flags().IntVar(&limit, "limit", 0, "at most this many comments")
	return cmd
}

func (a *app) newIssueUpdateCmd() *cobra.Command {
	var title, description, status, priority, assignee, comment, parent string
	var blockedBy []string
	var unassign bool
	cmd := &cobra.Command{
		Use:   "update ISSUE [flags]",
		Short: "Change an issue (only the flags given are sent)",
		Long: `Change an issue's title, description, status, priority or assignee, and
optionally add a comment in the same atomic write (so a result and status done
land together or not at all). While the issue is in_progress and locked, only
the holding run may change it (others exit with code 3). Agents cannot move an
issue to in_progress this way: use checkout. Leaving in_progress or changing
the assignee releases the lock.

--blocked-by replaces the issue's blockers (--blocked-by "" removes them all)
before the status change of the same call, so removing the last blocker and
setting done together works; done (or in_progress) with a blocker that is not
done is refused. --parent "" makes the issue top-level.`,
		Example: `  clasp issue update ACME-12 --status done --comment "fixed in 4f2a1c"
  clasp issue update ACME-12 --blocked-by ACME-3,ACME-4 --parent ACME-1
  clasp issue update ACME-12 --assignee <agent-id> --priority high
  clasp issue update ACME-12 --unassign --status todo`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			f := cmd.Flags()
			var req client.IssueUpdateRequest
			if f.Changed("title") {
				req.Title = &title
			}
			if f.Changed("description") {
				d, err := a.readBody(description)
				if err != nil {
					return err
				}
				req.Description = &d
			}
			if f.Changed("status") {
				st := clasp.IssueStatus(status)
				if !st.Valid() {
					return usageErr(fmt.Errorf("unknown issue status %q (want one of %s)", status, issueStatusList()))
				}
				req.Status = &st
			}
			if f.Changed("priority") {
				p := clasp.Priority(priority)
				if !p.Valid() {
					return usageErr(fmt.Errorf("unknown priority %q (want critical, high, medium or low)", priority))
				}
				req.Priority = &p
			}
			if f.Changed("assignee") {
				// A name is looked for among the agents of the issue's own
				// company: one an agent of another company shares is no
				// ambiguity.
				cid := ""
				if ref := strings.TrimSpace(assignee); ref != "" && !isUUID(ref) {
					iss, err := a.client().IssueGet(cmd.Context(), args[0])
					if err != nil {
						return err
					}
					cid = iss.CompanyID
				}
				id, err := a.resolveAgent(cmd.Context(), cid, assignee, "--assignee")
				if err != nil {
					return err
				}
				req.AssigneeAgentID = &id
			}
			req.Unassign = unassign
			if f.Changed("parent") {
				req.ParentID = &parent
			}
			if f.Changed("blocked-by") {
				ids, err := blockerFlag(blockedBy)
				if err != nil {
					return err
				}
				req.BlockedByIssueIDs = &ids
			}
			if f.Changed("comment") {
				c, err := a.readBody(comment)
				if err != nil {
					return err
				}
				req.Comment = &c
			}
			if req == (client.IssueUpdateRequest{}) {
				return usageErr(errors.New("nothing to update: give at least one of --title, --description, --status, --priority, --assignee, --unassign, --parent, --blocked-by, --comment"))
			}
			iss, err := a.client().IssueUpdate(cmd.Context(), args[0], req)
			if err != nil {
				return err
			}
			n := a.issueDetailNames(cmd.Context(), iss)
			return a.emit(iss, func(w io.Writer) { printIssue(w, iss, n) })
		},
	}
	f := cmd.Flags()
	f.StringVar(&title, "title", "", "new title")
	f.StringVar(&description, "description", "", "new description, or - for standard input")
	f.StringVar(&status, "status", "", "new status: "+issueStatusList())
	f.StringVar(&priority, "priority", "", "critical, high, medium or low")
	f.StringVar(&assignee, "assignee", "", "agent to assign: its id or name")
	f.BoolVar(&unassign, "unassign", false, "clear the assignee")
	f.StringVar(&parent, "parent", "", `issue this one is a part of (identifier or id; "" makes it top-level)`)
	f.StringSliceVar(&blockedBy, "blocked-by", nil, `comma-separated issues that must be done first; replaces the list ("" removes all)`)
	f.StringVar(&comment, "comment", "", "comment written in the same transaction, or - for standard input")
	cmd.MarkFlagsMutuallyExclusive("assignee", "unassign")
	return cmd
}

func (a *app) newIssueForceReleaseCmd() *cobra.Command {
	var reason string
	var clearAssignee bool
	cmd := &cobra.Command{
		Use:   "force-release ISSUE --reason TEXT",
		Short: "Clear every lock of an issue, even a live run's (board, audited)",
		Long: `Clear the checkout and execution locks of an issue whatever holds them. Only
the board may; the reason is written to the activity log. An in_progress
issue goes back to todo; the assignee stays unless --clear-assignee.

The run that held the issue is not stopped, and nothing refuses it for having
held the issue: the issue is simply unlocked. While that run is live it may
check the issue out again (if the issue is still its agent's, or unassigned),
under a new checkoutEpoch (the fencing token: systems that check the epoch
refuse writes made under the old one). To keep the old run away, assign the
issue to another agent ('clasp issue update ISSUE --assignee AGENT_ID'), or end
the run ('clasp run finish RUN_ID --status cancelled', as the board).
--clear-assignee takes the issue out of the agent's inbox, but any agent, the
old one included, may check out an unassigned issue.`,
		Example: `  clasp issue force-release ACME-12 --reason "agent host lost" --clear-assignee`,
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			iss, err := a.client().IssueForceRelease(cmd.Context(), args[0], client.ForceReleaseRequest{Reason: reason, ClearAssignee: clearAssignee})
			if err != nil {
				return err
			}
			return a.emit(iss, func(w io.Writer) {
				fmt.Fprintf(w, "Force-released %s (status %s).\n", iss.Identifier, iss.Status)
			})
		},
	}
	cmd.Flags().StringVar(&reason, "reason", "", "why, for the audit trail (required)")
	cmd.Flags().BoolVar(&clearAssignee, "clear-assignee", false, "clear the assignee as well")
	_ = cmd.MarkFlagRequired("reason")
	return cmd
}

// abandonedIssues returns the ids of the in_progress issues among items
// that no live run holds: no lock, or a holder run (the checkout run, else
// the execution run) that ended, whose lease ran out, or that does not
// exist. A queued holder is about to start, and a run that cannot be read
// for another reason marks nothing.
func abandonedIssues(ctx context.Context, c *client.Client, items []*clasp.Issue) map[string]bool {
	out := map[string]bool{}
	runs := map[string]bool{} // run id -> live
	for _, iss := range items {
		if iss.Status != clasp.IssueInProgress {
			continue
		}
		holder := cmp.Or(iss.CheckoutRunID, iss.ExecutionRunID)
		if holder == nil {
			out[iss.ID] = true
			continue
		}
		id := *holder
		live, ok := runs[id]
		if !ok {
			r, err := c.RunGet(ctx, id)
			switch {
			case err == nil:
				live = r.Status == clasp.RunQueued || (!r.Status.Terminal() && r.LeaseExpiresAt != nil && r.LeaseExpiresAt.After(time.Now()))
			case clasp.ErrorCode(err) == clasp.CodeNotFound:
				live = false
			default:
				live = true
			}
			runs[id] = live
		}
		if !live {
			out[iss.ID] = true
		}
	}
	return out
}

// blockerFlag returns the issues of a --blocked-by list, trimmed: [] for
// --blocked-by "" (no blocker), a usage error for a list with an empty
// entry ("ACME-1,,ACME-2", ",,", " "), which names no issue and would
// otherwise remove blockers silently.
func blockerFlag(list []string) ([]string, error) {
	ids := []string{}
	for _, b := range list {
		b = strings.TrimSpace(b)
		if b == "" {
			return nil, usageErr(fmt.Errorf("--blocked-by %q has an empty entry: list issues separated by commas (ACME-3,ACME-4), or give --blocked-by \"\" to remove every blocker", strings.Join(list, ",")))
		}
		ids = append(ids, b)
	}
	return ids, nil
}
