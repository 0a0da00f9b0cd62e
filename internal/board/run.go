package board

import (
	"net/url"
	"strings"

	"github.com/clasp-dev/clasp"
)

// runView is the page of one run: its state, its agent, the issues it
// holds and held, its log (when the server runs its process) and what it
// did, as sentences.
type runView struct {
	Run      *clasp.Run
	Ref      seg
	Agent    seg
	Liveness string
	Holds    []seg // the issues whose lock names the run now
	Held     []seg // the issues it touched and holds no more
	HasLog   bool
	Activity []actRow
}

func (b *Board) runData(c *client, v *view) error {
	id := c.r.PathValue("id")
	var r clasp.Run
	if _, err := c.get("/api/runs/"+url.PathEscape(id), &r); err != nil {
		return err
	}
	l, err := newLookup(c, v.Company.ID)
	if err != nil {
		return err
	}
	l.runs[r.ID] = &r
	rv := &runView{Run: &r, Ref: l.runRef(r.ID), Agent: l.agentRef(r.AgentID), Liveness: liveness(&r, l.now), HasLog: hasLog(&r)}
	v.Title = rv.Ref.Text
	held, err := heldIssues(c, v.Company.ID)
	if err != nil {
		return err
	}
	l.idents = map[string]string{}
	holds := map[string]bool{}
	for _, iss := range held {
		l.idents[iss.ID] = iss.Identifier
		if (iss.CheckoutRunID != nil && *iss.CheckoutRunID == r.ID) || (iss.ExecutionRunID != nil && *iss.ExecutionRunID == r.ID) {
			holds[iss.ID] = true
			rv.Holds = append(rv.Holds, l.issueRef(iss.ID))
		}
	}
	var acts []*clasp.Activity
	if _, err := c.get("/api/companies/"+v.Company.ID+"/activity?limit=1000", &acts); err != nil {
		return err
	}
	var mine []*clasp.Activity
	seen := map[string]bool{}
	for _, a := range acts {
		if (a.RunID == nil || *a.RunID != r.ID) && a.EntityID != r.ID && !strings.Contains(string(a.Details), `"`+r.ID+`"`) {
			continue
		}
		mine = append(mine, a)
		if a.EntityType == "issue" && !holds[a.EntityID] && !seen[a.EntityID] {
			seen[a.EntityID] = true
			rv.Held = append(rv.Held, l.issueRef(a.EntityID))
		}
	}
	if r.IssueID != nil && !holds[*r.IssueID] && !seen[*r.IssueID] {
		rv.Held = append(rv.Held, l.issueRef(*r.IssueID))
	}
	rv.Activity = l.rows(mine)
	v.Data = rv
	return nil
}
