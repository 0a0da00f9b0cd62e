package cli

import (
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/mattn/go-runewidth"

	"github.com/clasp-dev/clasp"
)

// This file prints resources: as indented JSON with --json (the resource
// exactly as the API answers it, or an array for lists), else as tables for
// lists and "Field: value" blocks for single resources.

// emit prints v as JSON when --json is set, else calls human.
func (a *app) emit(v any, human func(w io.Writer)) error {
	if a.jsonOut {
		return writeJSON(a.stdout, v)
	}
	human(textWriter{a.stdout})
	return nil
}

func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// table writes aligned columns: each but the last padded to the widest
// cell of its column plus two spaces, widths counted in terminal columns
// (a CJK character or an emoji takes two), so that names in any script
// line up.
type table struct {
	w    io.Writer
	rows [][]string
}

func newTable(w io.Writer, header ...string) *table {
	t := &table{w: w}
	t.row(header...)
	return t
}

// row adds one row, each column a cell (escaped onto its line).
func (t *table) row(cols ...string) {
	esc := make([]string, len(cols))
	for i, c := range cols {
		esc[i] = cell(c)
	}
	t.rows = append(t.rows, esc)
}

// flush writes the rows added so far, aligned among themselves.
func (t *table) flush() {
	var widths []int
	for _, r := range t.rows {
		for i, c := range r {
			if i == len(widths) {
				widths = append(widths, 0)
			}
			widths[i] = max(widths[i], runewidth.StringWidth(c))
		}
	}
	var b strings.Builder
	for _, r := range t.rows {
		for i, c := range r {
			b.WriteString(c)
			if i < len(r)-1 {
				b.WriteString(strings.Repeat(" ", widths[i]-runewidth.StringWidth(c)+2))
			}
		}
		b.WriteByte('\n')
	}
	_, _ = io.WriteString(t.w, b.String())
	t.rows = nil
}

// fields writes "Name:  value" lines, aligned, each value a cell.
func fields(w io.Writer, kv ...string) {
	t := &table{w: w}
	for i := 0; i+1 < len(kv); i += 2 {
		t.row(kv[i]+":", kv[i+1])
	}
	t.flush()
}

const none = "-"

func optStr(s *string) string {
	if s == nil || *s == "" {
		return none
	}
	return *s
}

func orNone(s string) string {
	if s == "" {
		return none
	}
	return s
}

func optInt(n *int) string {
	if n == nil {
		return none
	}
	return strconv.Itoa(*n)
}

func fmtTime(t time.Time) string {
	if t.IsZero() {
		return none
	}
	return t.UTC().Format(time.RFC3339)
}

func optTime(t *time.Time) string {
	if t == nil {
		return none
	}
	return fmtTime(*t)
}

func printCompany(w io.Writer, c *clasp.Company) {
	esc := "never"
	if c.EscalateAfterFailures > 0 {
		esc = fmt.Sprintf("after %d failed runs in a row", c.EscalateAfterFailures)
	}
	fields(w, "ID", c.ID, "Name", c.Name, "Issue prefix", c.IssuePrefix, "Branch template", c.BranchTemplate, "Escalates", esc,
		"Created", fmtTime(c.CreatedAt), "Archived", optTime(c.ArchivedAt))
}

func printCompanies(w io.Writer, cs []*clasp.Company) {
	archived := false
	for _, c := range cs {
		archived = archived || c.ArchivedAt != nil
	}
	if !archived {
		t := newTable(w, "ID", "PREFIX", "NAME", "CREATED")
		for _, c := range cs {
			t.row(c.ID, c.IssuePrefix, c.Name, fmtTime(c.CreatedAt))
		}
		t.flush()
		return
	}
	t := newTable(w, "ID", "PREFIX", "NAME", "CREATED", "ARCHIVED")
	for _, c := range cs {
		t.row(c.ID, c.IssuePrefix, c.Name, fmtTime(c.CreatedAt), optTime(c.ArchivedAt))
	}
	t.flush()
}

// printAgent prints an agent's fields, its company by the prefix n knows.
func printAgent(w io.Writer, ag *clasp.Agent, n *names) {
	fields(w, "ID", ag.ID, "Company", withID(n.company(ag.CompanyID), ag.CompanyID), "Name", ag.Name, "Name key", ag.NameKey,
		"Role", orNone(ag.Role), "Status", string(ag.Status), "Created", fmtTime(ag.CreatedAt),
		"Last heartbeat", optTime(ag.LastHeartbeatAt))
}

func printAgents(w io.Writer, as []*clasp.Agent) {
	t := newTable(w, "ID", "NAME", "STATUS", "ROLE", "LAST HEARTBEAT")
	for _, ag := range as {
		t.row(ag.ID, ag.Name, string(ag.Status), orNone(ag.Role), optTime(ag.LastHeartbeatAt))
	}
	t.flush()
}

func printKey(w io.Writer, k *clasp.APIKey) {
	fields(w, "ID", k.ID, "Agent", k.AgentID, "Prefix", k.Prefix, "Created", fmtTime(k.CreatedAt),
		"Last used", optTime(k.LastUsedAt), "Revoked", optTime(k.RevokedAt))
}

func printKeys(w io.Writer, ks []*clasp.APIKey) {
	t := newTable(w, "ID", "PREFIX", "CREATED", "LAST USED", "REVOKED")
	for _, k := range ks {
		t.row(k.ID, k.Prefix, fmtTime(k.CreatedAt), optTime(k.LastUsedAt), optTime(k.RevokedAt))
	}
	t.flush()
}

// printRun prints a run's fields, its company, agent and issue by the
// names n knows, and held, the identifiers of the issues whose locks name
// it.
func printRun(w io.Writer, r *clasp.Run, held []string, n *names) {
	issue := none
	if r.IssueID != nil {
		issue = withID(n.issue(*r.IssueID), *r.IssueID)
	}
	holds := none
	if len(held) > 0 {
		holds = strings.Join(held, ", ")
	}
	fields(w, "ID", r.ID, "Company", withID(n.company(r.CompanyID), r.CompanyID), "Agent", withID(n.agent(r.AgentID), r.AgentID),
		"Status", string(r.Status), "Invocation", orNone(r.InvocationSource), "Issue", issue, "Holds", holds, "Attempt", strconv.Itoa(r.Attempt),
		"Lease expires", optTime(r.LeaseExpiresAt), "Last sign of life", optTime(r.LastSignOfLifeAt),
		"Started", optTime(r.StartedAt), "Finished", optTime(r.FinishedAt), "Exit code", optInt(r.ExitCode),
		"Error code", optStr(r.ErrorCode), "Error", optStr(r.Error), "Created", fmtTime(r.CreatedAt))
}

// printRuns prints runs as a table, agents by the names n knows; ISSUE is
// what held (by run id) says each run holds, else the issue the run was
// woken for (by identifier when n knows it).
func printRuns(w io.Writer, rs []*clasp.Run, held map[string][]string, n *names) {
	t := newTable(w, "ID", "AGENT", "STATUS", "ISSUE", "LEASE EXPIRES", "ERROR CODE", "CREATED")
	for _, r := range rs {
		issue := none
		if r.IssueID != nil && *r.IssueID != "" {
			issue = n.issue(*r.IssueID)
		}
		if h := held[r.ID]; len(h) > 0 {
			issue = strings.Join(h, ",")
		}
		t.row(r.ID, n.agent(r.AgentID), string(r.Status), issue, optTime(r.LeaseExpiresAt), optStr(r.ErrorCode), fmtTime(r.CreatedAt))
	}
	t.flush()
}

// printIssue prints an issue's fields, its parent, company and assignee
// by the names n knows.
func printIssue(w io.Writer, i *clasp.Issue, n *names) {
	parent := none
	if i.ParentID != nil {
		parent = n.issue(*i.ParentID)
	}
	printIssueParent(w, i, parent, n)
}

// printIssueParent prints an issue's fields, its parent as parent says,
// its company and assignee by the names n knows.
func printIssueParent(w io.Writer, i *clasp.Issue, parent string, n *names) {
	assignee := none
	if i.AssigneeAgentID != nil {
		assignee = withID(n.agent(*i.AssigneeAgentID), *i.AssigneeAgentID)
	}
	fields(w, "Identifier", i.Identifier, "ID", i.ID, "Company", withID(n.company(i.CompanyID), i.CompanyID), "Title", i.Title,
		"Status", string(i.Status), "Priority", string(i.Priority), "Assignee", assignee,
		"Checkout run", optStr(i.CheckoutRunID), "Checkout epoch", strconv.FormatInt(i.CheckoutEpoch, 10),
		"Execution run", optStr(i.ExecutionRunID), "Execution agent", optStr(i.ExecutionAgentNameKey),
		"Locked at", optTime(i.ExecutionLockedAt), "Started", optTime(i.StartedAt),
		"Completed", optTime(i.CompletedAt), "Cancelled", optTime(i.CancelledAt),
		"Created", fmtTime(i.CreatedAt), "Updated", fmtTime(i.UpdatedAt),
		"Parent", parent, "Blocked by", summaries(i.BlockedBy), "Blocks", summaries(i.Blocks),
		"Ready", readiness(i))
	if i.CompletedEpoch != nil {
		fields(w, "Completed epoch", strconv.FormatInt(*i.CompletedEpoch, 10))
	}
	if ws := i.Workspace; ws != nil {
		// A grant: where the holder works and how it stamps its commits.
		fields(w, "Branch", ws.Branch, "Stamp", ws.Stamp)
	}
	if i.Description != "" {
		fmt.Fprintf(w, "\n%s\n", i.Description)
	}
}

// summaries lists issues as "ACME-3 (done), ACME-4 (todo)", or none.
func summaries(is []clasp.IssueSummary) string {
	if len(is) == 0 {
		return none
	}
	parts := make([]string, len(is))
	for k, s := range is {
		parts[k] = s.Identifier + " (" + string(s.Status) + ")"
	}
	return strings.Join(parts, ", ")
}

// readiness says whether an issue may enter in_progress or done (RULES.md,
// Dependencies): "yes", or "no: waiting on ACME-3, ACME-4".
func readiness(i *clasp.Issue) string {
	if i.DependencyReady {
		return "yes"
	}
	return "no: " + waitingOn(i)
}

// waitingOn names the unresolved blockers of an issue that is not ready
// ("waiting on ACME-3, ACME-4"; "" for a ready issue), by identifier when
// the answer carries its blockers, else by count.
func waitingOn(i *clasp.Issue) string {
	if i.DependencyReady || i.UnresolvedBlockerCount == 0 {
		return ""
	}
	unresolved := map[string]bool{}
	for _, id := range i.UnresolvedBlockerIssueIDs {
		unresolved[id] = true
	}
	var names []string
	for _, b := range i.BlockedBy {
		if unresolved[b.ID] {
			names = append(names, b.Identifier)
		}
	}
	if len(names) == 0 {
		return fmt.Sprintf("waiting on %d blockers", i.UnresolvedBlockerCount)
	}
	return "waiting on " + strings.Join(names, ", ")
}

// abandonedMark follows the status of an in_progress issue that no live
// run holds: it waits for a force-release (or its assignee's next run).
const abandonedMark = " (abandoned)"

// printIssues prints issues as a table, assignees by the names n knows;
// those in abandoned (by id) have their status marked abandoned.
func printIssues(w io.Writer, is []*clasp.Issue, abandoned map[string]bool, n *names) {
	t := newTable(w, "IDENTIFIER", "STATUS", "PRIORITY", "ASSIGNEE", "CHECKOUT RUN", "EPOCH", "TITLE")
	for _, i := range is {
		st := string(i.Status)
		if abandoned[i.ID] {
			st += abandonedMark
		}
		if w := waitingOn(i); w != "" {
			st += " (" + w + ")"
		}
		assignee := none
		if i.AssigneeAgentID != nil && *i.AssigneeAgentID != "" {
			assignee = n.agent(*i.AssigneeAgentID)
		}
		t.row(i.Identifier, st, string(i.Priority), assignee,
			optStr(i.CheckoutRunID), strconv.FormatInt(i.CheckoutEpoch, 10), i.Title)
	}
	t.flush()
}

func printInbox(w io.Writer, items []*clasp.InboxItem) {
	t := newTable(w, "IDENTIFIER", "STATUS", "PRIORITY", "ACTIVE RUN", "UPDATED", "TITLE")
	for _, i := range items {
		active := none
		if i.ActiveRun != nil {
			active = i.ActiveRun.ID + " (" + string(i.ActiveRun.Status) + ")"
		}
		st := string(i.Status)
		if i.Status == clasp.IssueInProgress && (i.ActiveRun == nil || i.ActiveRun.Status.Terminal()) {
			st += abandonedMark
		}
		if !i.DependencyReady && i.UnresolvedBlockerCount > 0 {
			st += fmt.Sprintf(" (waiting on %d blockers)", i.UnresolvedBlockerCount)
		}
		t.row(i.Identifier, st, string(i.Priority), active, fmtTime(i.UpdatedAt), i.Title)
	}
	t.flush()
}

func commentAuthor(c *clasp.Comment, n *names) string {
	switch {
	case c.AuthorBoard:
		return "board"
	case c.AuthorAgentID != nil:
		return "agent " + n.agent(*c.AuthorAgentID)
	}
	return "clasp (the server)"
}

// printComment prints a comment, its issue and author by the names n
// knows.
func printComment(w io.Writer, c *clasp.Comment, n *names) {
	author := commentAuthor(c, n)
	if c.AuthorAgentID != nil {
		author = "agent " + withID(n.agent(*c.AuthorAgentID), *c.AuthorAgentID)
	}
	fields(w, "ID", c.ID, "Issue", withID(n.issue(c.IssueID), c.IssueID), "Author", author, "Run", optStr(c.RunID), "Created", fmtTime(c.CreatedAt))
	fmt.Fprintf(w, "\n%s\n", c.Body)
}

// printComments prints comments, oldest first, their authors by the
// names n knows.
func printComments(w io.Writer, cs []*clasp.Comment, n *names) {
	for i, c := range cs {
		if i > 0 {
			fmt.Fprintln(w)
		}
		fmt.Fprintf(w, "%s  %s  %s", fmtTime(c.CreatedAt), commentAuthor(c, n), c.ID)
		if c.RunID != nil {
			fmt.Fprintf(w, "  run %s", *c.RunID)
		}
		fmt.Fprintf(w, "\n%s\n", indent(c.Body, "    "))
	}
}

func indent(s, prefix string) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	for i, l := range lines {
		lines[i] = prefix + l
	}
	return strings.Join(lines, "\n")
}

// printActivity prints activity rows as a table, actors and entities by
// the names n knows (names.actor, names.entity).
func printActivity(w io.Writer, as []*clasp.Activity, n *names) {
	t := newTable(w, "ID", "TIME", "ACTOR", "ACTION", "ENTITY", "RUN", "DETAILS")
	for _, ac := range as {
		t.row(strconv.FormatInt(ac.ID, 10), fmtTime(ac.CreatedAt), n.actor(ac), ac.Action,
			n.entity(ac), optStr(ac.RunID), orNone(activityDetails(ac)))
	}
	t.flush()
}

// activityDetails is the details of row ac as one line, "" for none.
func activityDetails(ac *clasp.Activity) string {
	details := strings.TrimSpace(string(ac.Details))
	if details == "{}" || details == "null" {
		return ""
	}
	return details
}
