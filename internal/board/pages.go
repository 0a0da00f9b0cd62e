package board

import (
	"cmp"
	"encoding/json"
	"errors"
	"net/http"
	"net/url"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/clasp-dev/clasp"
)

// view is what every page template gets.
type view struct {
	Title        string
	Page         string // template name, also the nav's current entry
	ReadOnly     bool
	LocalTrusted bool
	ServerNow    int64 // the server's clock at render, Unix ms (the live layer's lease ticker corrects by it)
	Companies    []clasp.Company
	Company      *clasp.Company
	Error        string // a readable message when the page's data could not be read
	// LastEventID is the company's newest activity id when the page was
	// read: the live layer streams the events after it, so none written
	// between this render and the stream's start is missed.
	LastEventID int64
	Data        any
}

// Actions are the activity actions the live layer subscribes to (the
// event stream names each event by its action): all of them.
var Actions = clasp.Actions

// page wraps a page's data function with the sign-in check (a redirect to
// /login without a valid cookie) and the company picker (?company=ID, else
// the first company that is not archived). The picker lists the companies
// that are not archived, and an archived one only while it is open (by its
// link), marked as archived.
func (b *Board) page(name string, fill func(c *client, v *view) error) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		c := &client{b: b, r: r}
		if !b.cfg.LocalTrusted {
			c.token = sessionCookie(r)
			if c.token == "" {
				http.Redirect(w, r, "/login", http.StatusSeeOther)
				return
			}
		}
		v := &view{Title: strings.ToUpper(name[:1]) + name[1:]}
		var all []clasp.Company
		if _, err := c.get("/api/companies?limit=1000&includeArchived=true", &all); err != nil {
			var ae *apiError
			if errors.As(err, &ae) && ae.Status == http.StatusUnauthorized {
				http.SetCookie(w, &http.Cookie{Name: CookieName, Path: "/", MaxAge: -1, HttpOnly: true, SameSite: http.SameSiteStrictMode}) // #nosec G124 -- deletes a stale cookie (no value), on any transport
				http.Redirect(w, r, "/login", http.StatusSeeOther)
				return
			}
			v.Error = "The companies could not be read: " + err.Error()
			b.render(w, r, "nocompany", http.StatusBadGateway, v)
			return
		}
		var me struct {
			Role string `json:"role"`
		}
		if _, err := c.get("/api/operators/me", &me); err == nil && me.Role == string(clasp.RoleViewer) {
			v.ReadOnly = true // a viewer's token makes no changes: the page shows no actions
		}
		want := r.URL.Query().Get("company")
		for _, co := range all {
			if co.ArchivedAt == nil || co.ID == want {
				v.Companies = append(v.Companies, co)
			}
		}
		for i := range v.Companies {
			if v.Companies[i].ID == want || (want == "" && i == 0) {
				v.Company = &v.Companies[i]
				break
			}
		}
		if v.Company == nil {
			status := http.StatusOK
			if want != "" {
				status = http.StatusNotFound
				v.Error = "There is no company " + want + "."
			}
			b.render(w, r, "nocompany", status, v)
			return
		}
		var newest []struct {
			ID int64 `json:"id"`
		}
		if _, err := c.get("/api/companies/"+v.Company.ID+"/activity?limit=1", &newest); err == nil && len(newest) == 1 {
			v.LastEventID = newest[0].ID
		}
		if err := fill(c, v); err != nil {
			// A page whose data could not be read (an unknown issue: 404)
			// answers the API's status with its message on the error page:
			// the page's own template needs the data it lacks.
			status := http.StatusBadGateway
			var ae *apiError
			if errors.As(err, &ae) {
				status = ae.Status
				v.Error = ae.Message
			} else {
				v.Error = err.Error()
			}
			b.render(w, r, "error", status, v)
			return
		}
		b.render(w, r, name, http.StatusOK, v)
	}
}

// lockView is an issue's lock as the board shows it: the checkout lock's
// holder run and agent, the run's liveness, lease and last sign of life,
// the fencing epoch, and whether the execution lock agrees.
type lockView struct {
	RunID        string
	AgentID      string
	AgentName    string
	Epoch        int64
	Since        *time.Time // when the execution lock was taken (else the issue's start)
	LeaseExpires *time.Time
	LastSign     *time.Time
	RunStatus    string
	// Liveness is live (running with its lease ahead), lost (its lease
	// ran out; the sweeper will clear it), terminal (the run ended) or
	// missing (no such run).
	Liveness       string
	ExecutionRunID string
	Agree          bool // the execution lock names the checkout run
	Run            seg  // the holder run, named and linked
	ExecutionRun   seg  // the execution lock's run, named and linked
}

// lookup caches the runs and agents a page resolves.
type lookup struct {
	c         *client
	companyID string
	now       time.Time
	runs      map[string]*clasp.Run // nil value: missing
	agents    map[string]*clasp.Agent
	// ends maps an issue id to the newest row that ended its lock among
	// the company's latest 1000 activity rows (read once, when needed).
	ends map[string]*clasp.Activity
	// idents maps issue ids to identifiers ("" for an issue not found).
	idents map[string]string
}

func newLookup(c *client, companyID string) (*lookup, error) {
	l := &lookup{c: c, companyID: companyID, now: c.b.cfg.Now(), runs: map[string]*clasp.Run{}, agents: map[string]*clasp.Agent{}}
	var agents []*clasp.Agent
	if _, err := c.get("/api/companies/"+companyID+"/agents?limit=1000", &agents); err != nil {
		return nil, err
	}
	for _, a := range agents {
		l.agents[a.ID] = a
	}
	var live []*clasp.Run
	if _, err := c.get("/api/companies/"+companyID+"/runs?status=running,queued&limit=1000", &live); err != nil {
		return nil, err
	}
	for _, r := range live {
		l.runs[r.ID] = r
	}
	return l, nil
}

// run returns run id (nil when it does not exist).
func (l *lookup) run(id string) *clasp.Run {
	if r, ok := l.runs[id]; ok {
		return r
	}
	var r clasp.Run
	if _, err := l.c.get("/api/runs/"+url.PathEscape(id), &r); err != nil {
		l.runs[id] = nil
		return nil
	}
	l.runs[id] = &r
	return &r
}

func (l *lookup) agentName(id string) string {
	if a := l.agents[id]; a != nil {
		return a.Name
	}
	return id
}

// liveness classifies run r at now: live, lost, terminal or missing.
func liveness(r *clasp.Run, now time.Time) string {
	switch {
	case r == nil:
		return "missing"
	case r.Status.Terminal():
		return "terminal"
	case r.LeaseExpiresAt == nil || !r.LeaseExpiresAt.After(now):
		return "lost"
	default:
		return "live"
	}
}

// lock returns the lock view of iss, nil when it holds no lock.
func (l *lookup) lock(iss *clasp.Issue) *lockView {
	if iss.CheckoutRunID == nil && iss.ExecutionRunID == nil {
		return nil
	}
	lv := &lockView{Epoch: iss.CheckoutEpoch, Since: iss.ExecutionLockedAt}
	if lv.Since == nil {
		lv.Since = iss.StartedAt
	}
	if iss.ExecutionRunID != nil {
		lv.ExecutionRunID = *iss.ExecutionRunID
	}
	holder := lv.ExecutionRunID
	if iss.CheckoutRunID != nil {
		lv.RunID = *iss.CheckoutRunID
		holder = lv.RunID
		lv.Agree = lv.ExecutionRunID == lv.RunID
	}
	r := l.run(holder)
	lv.Liveness = liveness(r, l.now)
	lv.Run = l.runRef(holder)
	if lv.ExecutionRunID != "" {
		lv.ExecutionRun = l.runRef(lv.ExecutionRunID)
	}
	if r != nil {
		lv.AgentID, lv.AgentName = r.AgentID, l.agentName(r.AgentID)
		lv.LeaseExpires, lv.LastSign, lv.RunStatus = r.LeaseExpiresAt, r.LastSignOfLifeAt, string(r.Status)
	}
	return lv
}

// card is one issue on the board.
type card struct {
	Issue     *clasp.Issue
	Assignee  string
	Lock      *lockView
	Abandoned *abandonedView
}

type column struct {
	Status  string
	Cards   []card
	Count   string // "12", or "50+" when more are not shown
	MoreURL string // the board with this column showing more ("" when all are shown)
}

type boardView struct {
	Columns  []column
	Agents   []*clasp.Agent
	Agent    string // filter: assignee agent id, or "none"
	Status   string // filter: one status ("" all)
	Q        string // filter: search text
	Statuses []string
}

var statuses = []string{"backlog", "todo", "in_progress", "in_review", "blocked", "done", "cancelled"}

// Column paging: each column shows columnPage cards, and "more" adds
// another columnPage, up to the API's 1000; the DOM stays bounded.
const columnPage = 25

func (b *Board) boardData(c *client, v *view) error {
	q := c.r.URL.Query()
	bv := &boardView{Agent: q.Get("agent"), Status: q.Get("status"), Q: strings.TrimSpace(q.Get("q")), Statuses: statuses}
	l, err := newLookup(c, v.Company.ID)
	if err != nil {
		return err
	}
	for _, a := range l.agents {
		bv.Agents = append(bv.Agents, a)
	}
	sort.Slice(bv.Agents, func(i, j int) bool { return bv.Agents[i].Name < bv.Agents[j].Name })
	for _, st := range statuses {
		if bv.Status != "" && bv.Status != st {
			continue
		}
		n := columnPage
		if m, err := strconv.Atoi(q.Get("n_" + st)); err == nil && m > 0 {
			n = min(m, 1000)
		}
		p := url.Values{"status": {st}, "limit": {strconv.Itoa(n)}}
		if bv.Q != "" {
			p.Set("q", bv.Q)
		}
		if bv.Agent != "" {
			p.Set("assigneeAgentId", bv.Agent)
		}
		var issues []*clasp.Issue
		next, err := c.get("/api/companies/"+v.Company.ID+"/issues?"+p.Encode(), &issues)
		if err != nil {
			return err
		}
		col := column{Status: st, Count: strconv.Itoa(len(issues))}
		if next != "" {
			col.Count += "+"
			if n < 1000 {
				mq := url.Values{}
				for k, vs := range q {
					mq[k] = vs
				}
				mq.Set("n_"+st, strconv.Itoa(n+columnPage))
				col.MoreURL = "/?" + mq.Encode()
			}
		}
		for _, iss := range issues {
			cd := card{Issue: iss, Lock: l.lock(iss)}
			cd.Abandoned = l.abandoned(iss, cd.Lock, nil)
			if iss.AssigneeAgentID != nil {
				cd.Assignee = l.agentName(*iss.AssigneeAgentID)
			}
			col.Cards = append(col.Cards, cd)
		}
		if st == string(clasp.IssueInProgress) {
			// As claim-next picks: most urgent first, then oldest.
			sort.SliceStable(col.Cards, func(i, j int) bool {
				a, b := col.Cards[i].Issue, col.Cards[j].Issue
				if a.Priority.Rank() != b.Priority.Rank() {
					return a.Priority.Rank() < b.Priority.Rank()
				}
				if !a.CreatedAt.Equal(b.CreatedAt) {
					return a.CreatedAt.Before(b.CreatedAt)
				}
				return a.ID < b.ID
			})
		}
		bv.Columns = append(bv.Columns, col)
	}
	v.Data = bv
	return nil
}

type issueView struct {
	Issue     *clasp.Issue
	Assignee  string
	Lock      *lockView
	Abandoned *abandonedView
	Holder    *clasp.Run
	Comments  []*clasp.Comment
	Activity  []*clasp.Activity
	History   []actRow
	Runs      []runLink
	Agents    []*clasp.Agent
	Statuses  []string
	Names     map[string]string
	// Parent is the issue this one is a part of (nil for a top-level
	// issue) and Children the issues that are parts of it.
	Parent   *clasp.IssueSummary
	Children []clasp.IssueSummary
	// BlockedByText and ParentText prefill the edit form: identifiers.
	BlockedByText, ParentText string
}

func (b *Board) issueData(c *client, v *view) error {
	var iss clasp.Issue
	if _, err := c.get("/api/issues/"+url.PathEscape(c.r.PathValue("ref")), &iss); err != nil {
		return err
	}
	v.Title = iss.Identifier
	l, err := newLookup(c, v.Company.ID)
	if err != nil {
		return err
	}
	iv := &issueView{Issue: &iss, Lock: l.lock(&iss), Statuses: statuses, Names: map[string]string{}}
	for id, a := range l.agents {
		iv.Agents = append(iv.Agents, a)
		iv.Names[id] = a.Name
	}
	sort.Slice(iv.Agents, func(i, j int) bool { return iv.Agents[i].Name < iv.Agents[j].Name })
	if iss.AssigneeAgentID != nil {
		iv.Assignee = l.agentName(*iss.AssigneeAgentID)
	}
	if iv.Lock != nil {
		iv.Holder = l.runs[iv.Lock.RunID]
	}
	if _, err := c.get("/api/issues/"+iss.ID+"/comments?order=asc&limit=1000", &iv.Comments); err != nil {
		return err
	}
	if _, err := c.get("/api/issues/"+iss.ID+"/activity?limit=1000", &iv.Activity); err != nil {
		return err
	}
	if err := dependencies(c, iv); err != nil {
		return err
	}
	iv.Abandoned = l.abandoned(&iss, iv.Lock, iv.Activity)
	l.idents = map[string]string{iss.ID: iss.Identifier}
	iv.History = l.rows(iv.Activity)
	// The issue's runs: those its activity names, newest first.
	seen := map[string]bool{}
	for _, a := range iv.Activity {
		var d details
		_ = json.Unmarshal(a.Details, &d)
		for _, id := range []*string{a.RunID, &d.RunID, &d.PreviousCheckoutRunID, &d.ClearedCheckoutRunID, &d.ToRunID} {
			if id == nil || *id == "" || seen[*id] {
				continue
			}
			seen[*id] = true
			if r := l.run(*id); r != nil {
				iv.Runs = append(iv.Runs, runLink{Run: r, Ref: l.runRef(r.ID), Agent: l.agentRef(r.AgentID)})
			}
		}
	}
	sort.Slice(iv.Runs, func(i, j int) bool { return iv.Runs[i].Run.CreatedAt.After(iv.Runs[j].Run.CreatedAt) })
	v.Data = iv
	return nil
}

// dependencies fills the parent and the children of iv's issue (its
// blockers and dependents come with the issue's answer) and the edit
// form's dependency fields.
func dependencies(c *client, iv *issueView) error {
	iss := iv.Issue
	if iss.ParentID != nil {
		var p clasp.Issue
		if _, err := c.get("/api/issues/"+url.PathEscape(*iss.ParentID), &p); err != nil {
			return err
		}
		iv.Parent = &clasp.IssueSummary{ID: p.ID, Identifier: p.Identifier, Title: p.Title, Status: p.Status}
		iv.ParentText = p.Identifier
	}
	var children []*clasp.Issue
	if _, err := c.get("/api/companies/"+iss.CompanyID+"/issues?parentId="+iss.ID+"&limit=1000", &children); err != nil {
		return err
	}
	for _, ch := range children {
		iv.Children = append(iv.Children, clasp.IssueSummary{ID: ch.ID, Identifier: ch.Identifier, Title: ch.Title, Status: ch.Status})
	}
	sort.Slice(iv.Children, func(i, j int) bool { return identNum(iv.Children[i].Identifier) < identNum(iv.Children[j].Identifier) })
	ids := make([]string, len(iss.BlockedBy))
	for k, b := range iss.BlockedBy {
		ids[k] = b.Identifier
	}
	iv.BlockedByText = strings.Join(ids, ", ")
	return nil
}

// identNum is the number of an identifier (12 for ACME-12), to order
// issues as people count them; 0 when there is none.
func identNum(ident string) int {
	_, n, _ := strings.Cut(ident, "-")
	v, _ := strconv.Atoi(n)
	return v
}

// waitingOn returns the blockers of iss that are not done (its unresolved
// blockers), in the order of its answer.
func waitingOn(iss *clasp.Issue) []clasp.IssueSummary {
	unresolved := map[string]bool{}
	for _, id := range iss.UnresolvedBlockerIssueIDs {
		unresolved[id] = true
	}
	var out []clasp.IssueSummary
	for _, b := range iss.BlockedBy {
		if unresolved[b.ID] {
			out = append(out, b)
		}
	}
	return out
}

// runLink is a run with its link and its agent's.
type runLink struct {
	Run   *clasp.Run
	Ref   seg
	Agent seg
}

type runRow struct {
	Run       *clasp.Run
	Ref       seg // the run, named and linked to its page
	Agent     seg
	AgentName string
	// Issues are the identifiers of the issues whose checkout or
	// execution lock names the run, else the issue it was woken for (its
	// identifier, else its id).
	Issues   []string
	Liveness string
	HasLog   bool // a server-managed run (its log is served)
}

type runsView struct {
	Live, Recent []runRow
}

func (b *Board) runsData(c *client, v *view) error {
	l, err := newLookup(c, v.Company.ID)
	if err != nil {
		return err
	}
	var recent []*clasp.Run
	if _, err := c.get("/api/companies/"+v.Company.ID+"/runs?limit=100", &recent); err != nil {
		return err
	}
	held, err := heldIssues(c, v.Company.ID)
	if err != nil {
		return err
	}
	holds := map[string][]string{} // run id -> identifiers of the issues it holds
	for _, iss := range held {
		for _, id := range []*string{iss.CheckoutRunID, iss.ExecutionRunID} {
			if id != nil && !slices.Contains(holds[*id], iss.Identifier) {
				holds[*id] = append(holds[*id], iss.Identifier)
			}
		}
	}
	idents := map[string]string{}
	row := func(r *clasp.Run) runRow {
		rr := runRow{Run: r, Ref: l.runRef(r.ID), Agent: l.agentRef(r.AgentID), AgentName: l.agentName(r.AgentID), Liveness: liveness(r, l.now), HasLog: hasLog(r)}
		rr.Issues = holds[r.ID]
		if len(rr.Issues) == 0 && r.IssueID != nil {
			id := *r.IssueID
			if _, ok := idents[id]; !ok {
				var iss clasp.Issue
				idents[id] = id
				if _, err := c.get("/api/issues/"+id, &iss); err == nil {
					idents[id] = iss.Identifier
				}
			}
			rr.Issues = []string{idents[id]}
		}
		return rr
	}
	rv := &runsView{}
	liveIDs := map[string]bool{}
	for _, r := range l.runs {
		if r != nil && !r.Status.Terminal() {
			rv.Live = append(rv.Live, row(r))
			liveIDs[r.ID] = true
		}
	}
	sort.Slice(rv.Live, func(i, j int) bool { return rv.Live[i].Run.CreatedAt.After(rv.Live[j].Run.CreatedAt) })
	for _, r := range recent {
		if !liveIDs[r.ID] {
			rv.Recent = append(rv.Recent, row(r))
		}
	}
	v.Data = rv
	return nil
}

type agentRow struct {
	Agent    *clasp.Agent
	LiveRuns int
	Holds    []*clasp.Issue
	Keys     []*clasp.APIKey
}

type agentsView struct{ Agents []agentRow }

func (b *Board) agentsData(c *client, v *view) error {
	l, err := newLookup(c, v.Company.ID)
	if err != nil {
		return err
	}
	held, err := heldIssues(c, v.Company.ID)
	if err != nil {
		return err
	}
	av := &agentsView{}
	for _, a := range l.agents {
		row := agentRow{Agent: a}
		for _, r := range l.runs {
			if r != nil && r.AgentID == a.ID && !r.Status.Terminal() {
				row.LiveRuns++
			}
		}
		for _, iss := range held {
			if iss.CheckoutRunID != nil {
				if r := l.run(*iss.CheckoutRunID); r != nil && r.AgentID == a.ID {
					row.Holds = append(row.Holds, iss)
				}
			}
		}
		if _, err := c.get("/api/agents/"+a.ID+"/keys?limit=100", &row.Keys); err != nil {
			return err
		}
		av.Agents = append(av.Agents, row)
	}
	sort.Slice(av.Agents, func(i, j int) bool { return av.Agents[i].Agent.Name < av.Agents[j].Agent.Name })
	v.Data = av
	return nil
}

// heldIssues returns the company's issues that hold a lock (up to 1000 of
// the active statuses, where locks live).
func heldIssues(c *client, companyID string) ([]*clasp.Issue, error) {
	var issues []*clasp.Issue
	if _, err := c.get("/api/companies/"+companyID+"/issues?status=todo,in_progress,in_review,blocked,backlog&limit=1000", &issues); err != nil {
		return nil, err
	}
	out := issues[:0]
	for _, iss := range issues {
		if iss.CheckoutRunID != nil || iss.ExecutionRunID != nil {
			out = append(out, iss)
		}
	}
	return out, nil
}

type heldRow struct {
	Issue     *clasp.Issue
	Lock      *lockView
	Abandoned *abandonedView
}

type locksView struct {
	Held, Dead    []heldRow
	Abandoned     []heldRow // in_progress with no live holder, oldest first
	LastSweep     []actRow  // the newest row the sweeper (actor system) wrote (none or one)
	Swept         []actRow  // stale locks cleared and runs lost, newest first
	Adoptions     []actRow
	ForceReleases []actRow
}

func (b *Board) locksData(c *client, v *view) error {
	l, err := newLookup(c, v.Company.ID)
	if err != nil {
		return err
	}
	held, err := heldIssues(c, v.Company.ID)
	if err != nil {
		return err
	}
	lv := &locksView{}
	var working []*clasp.Issue
	if _, err := c.get("/api/companies/"+v.Company.ID+"/issues?status=in_progress&limit=1000", &working); err != nil {
		return err
	}
	for _, iss := range working {
		lk := l.lock(iss)
		if ab := l.abandoned(iss, lk, nil); ab != nil {
			lv.Abandoned = append(lv.Abandoned, heldRow{Issue: iss, Lock: lk, Abandoned: ab})
		}
	}
	sort.Slice(lv.Abandoned, func(i, j int) bool { return lv.Abandoned[i].Abandoned.Since.Before(lv.Abandoned[j].Abandoned.Since) })
	for _, iss := range held {
		row := heldRow{Issue: iss, Lock: l.lock(iss)}
		if row.Lock.Liveness == "live" {
			lv.Held = append(lv.Held, row)
		} else {
			lv.Dead = append(lv.Dead, row)
		}
	}
	oldest := func(rows []heldRow) {
		sort.Slice(rows, func(i, j int) bool {
			a, b := rows[i].Lock.Since, rows[j].Lock.Since
			return a != nil && (b == nil || a.Before(*b))
		})
	}
	oldest(lv.Held)
	oldest(lv.Dead)
	var acts []*clasp.Activity
	if _, err := c.get("/api/companies/"+v.Company.ID+"/activity?limit=1000", &acts); err != nil {
		return err
	}
	var swept, adoptions, forced, last []*clasp.Activity
	for _, a := range acts {
		switch {
		case a.Action == clasp.ActionIssueStaleLockCleared || a.Action == clasp.ActionRunLost:
			if len(swept) < 50 {
				swept = append(swept, a)
			}
		case a.Action == clasp.ActionIssueLockAdopted:
			if len(adoptions) < 50 {
				adoptions = append(adoptions, a)
			}
		case a.Action == clasp.ActionIssueForceRelease:
			if len(forced) < 50 {
				forced = append(forced, a)
			}
		}
		if a.ActorType == clasp.ActorSystem && last == nil {
			last = []*clasp.Activity{a}
		}
	}
	lv.Swept, lv.Adoptions, lv.ForceReleases, lv.LastSweep = l.rows(swept), l.rows(adoptions), l.rows(forced), l.rows(last)
	v.Data = lv
	return nil
}

type activityView struct {
	Rows     []actRow
	Action   string
	Entity   string // entity type, or type:id
	Actions  []string
	Entities []string
	Older    string // URL of the next older page ("" at the end)
}

func (b *Board) activityData(c *client, v *view) error {
	q := c.r.URL.Query()
	av := &activityView{Action: q.Get("action"), Entity: q.Get("entity"), Actions: Actions, Entities: []string{"issue", "run", "agent", "company"}}
	p := url.Values{"limit": {"1000"}}
	if cur := q.Get("cursor"); cur != "" {
		p.Set("cursor", cur)
	}
	var acts []*clasp.Activity
	next, err := c.get("/api/companies/"+v.Company.ID+"/activity?"+p.Encode(), &acts)
	if err != nil {
		return err
	}
	l, err := newLookup(c, v.Company.ID)
	if err != nil {
		return err
	}
	etype, eid, _ := strings.Cut(av.Entity, ":")
	var rows []*clasp.Activity
	for _, a := range acts {
		if av.Action != "" && a.Action != av.Action {
			continue
		}
		if etype != "" && a.EntityType != etype {
			continue
		}
		if eid != "" && a.EntityID != eid {
			continue
		}
		if len(rows) < 200 {
			rows = append(rows, a)
		}
	}
	av.Rows = l.rows(rows)
	if cur := cursorOf(next); cur != "" {
		oq := url.Values{}
		for k, vs := range q {
			oq[k] = slices.Clone(vs)
		}
		oq.Set("cursor", cur)
		av.Older = "/activity?" + oq.Encode()
	}
	v.Data = av
	return nil
}

// abandonedView says that an in_progress issue has no live holder: no
// lock, or a lock whose run is not live. Since and Holder come from the
// issue's newest lock activity row (or from the dead holder run itself).
type abandonedView struct {
	Since  time.Time
	Holder string // the agent that last held it, "" when none is known
}

// lockEnds are the activity actions that end an issue's lock.
var lockEnds = map[string]bool{
	clasp.ActionIssueLockReleased: true, clasp.ActionIssueStaleLockCleared: true,
	clasp.ActionIssueReleased: true, clasp.ActionIssueForceRelease: true,
}

// abandoned returns why iss, whose lock view is lv, is abandoned, or nil
// when it is not in_progress or a live run holds it. An issue without a
// lock is looked up in its activity (acts, newest first; read when nil).
func (l *lookup) abandoned(iss *clasp.Issue, lv *lockView, acts []*clasp.Activity) *abandonedView {
	if iss.Status != clasp.IssueInProgress || (lv != nil && (lv.Liveness == "live" || lv.RunStatus == string(clasp.RunQueued))) {
		return nil // held by a live run, or by a queued one about to start
	}
	if lv != nil { // a dead holder the sweeper has not cleared yet
		av := &abandonedView{Since: iss.UpdatedAt, Holder: lv.AgentName}
		if r := l.run(cmp.Or(lv.RunID, lv.ExecutionRunID)); r != nil {
			switch {
			case r.FinishedAt != nil:
				av.Since = *r.FinishedAt
			case r.LeaseExpiresAt != nil:
				av.Since = *r.LeaseExpiresAt
			}
		}
		return av
	}
	if acts == nil {
		if l.ends == nil {
			l.ends = map[string]*clasp.Activity{}
			var recent []*clasp.Activity
			_, _ = l.c.get("/api/companies/"+l.companyID+"/activity?limit=1000", &recent)
			for _, a := range recent { // newest first
				if lockEnds[a.Action] && a.EntityType == "issue" && l.ends[a.EntityID] == nil {
					l.ends[a.EntityID] = a
				}
			}
		}
		if a := l.ends[iss.ID]; a != nil {
			acts = []*clasp.Activity{a}
		} else { // ended longer ago than the company's latest rows
			_, _ = l.c.get("/api/issues/"+url.PathEscape(iss.ID)+"/activity?limit=1000", &acts)
		}
	}
	av := &abandonedView{Since: iss.UpdatedAt}
	for _, a := range acts {
		if !lockEnds[a.Action] {
			continue
		}
		av.Since = a.CreatedAt
		var d struct {
			RunID        string `json:"runId"`
			Cleared      string `json:"clearedCheckoutRunId"`
			Previous     string `json:"previousCheckoutRunId"`
			ClearedExec  string `json:"clearedExecutionRunId"`
			PreviousExec string `json:"previousExecutionRunId"`
		}
		_ = json.Unmarshal(a.Details, &d)
		for _, id := range []string{d.RunID, d.Cleared, d.Previous, d.ClearedExec, d.PreviousExec} {
			if id == "" {
				continue
			}
			if r := l.run(id); r != nil {
				av.Holder = l.agentName(r.AgentID)
				break
			}
		}
		break
	}
	return av
}

// hasLog reports whether the server ran r's process, so that it serves
// r's log.
func hasLog(r *clasp.Run) bool {
	return r.InvocationSource != "" && r.InvocationSource != "agent" && r.HostID != nil
}

// webhooksView is the data of the webhooks page: each subscription with
// its newest deliveries.
type webhooksView struct {
	Hooks []webhookRow
}

type webhookRow struct {
	Hook       clasp.Webhook
	Deliveries []clasp.WebhookDelivery
}

// webhooksData reads the company's webhook subscriptions and the 20
// newest deliveries of each (RULES.md W4, W6).
func (b *Board) webhooksData(c *client, v *view) error {
	var hooks []clasp.Webhook
	if _, err := c.get("/api/companies/"+v.Company.ID+"/webhooks", &hooks); err != nil {
		return err
	}
	wv := &webhooksView{}
	for _, h := range hooks {
		row := webhookRow{Hook: h}
		if _, err := c.get("/api/webhooks/"+h.ID+"/deliveries?limit=20", &row.Deliveries); err != nil {
			return err
		}
		wv.Hooks = append(wv.Hooks, row)
	}
	v.Title = "Webhooks"
	v.Data = wv
	return nil
}

// attentionView is the data of the "Needs attention" page.
type attentionView struct {
	Items []clasp.AttentionItem
}

// attentionData reads the issues that need a person, escalated first
// (RULES.md E5).
func (b *Board) attentionData(c *client, v *view) error {
	av := &attentionView{}
	if _, err := c.get("/api/companies/"+v.Company.ID+"/attention", &av.Items); err != nil {
		return err
	}
	v.Title = "Needs attention"
	v.Data = av
	return nil
}
