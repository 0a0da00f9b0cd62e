package httpapi

import (
	"context"

	"github.com/clasp-dev/clasp"
)

// Dependencies is what the API nudges after a write that may have made an
// issue ready or completed a parent's children (RULES.md, Dependencies):
// the sweeper's dependency-wake pass, run at once. The pass itself decides
// and sends each wake once; a nudge lost in a crash is made up by the next
// regular pass.
type Dependencies interface {
	// Nudge asks for a dependency-wake pass at once; it never blocks.
	Nudge()
}

// Nudger is something the API asks to act at once (Nudge never blocks).
type Nudger interface{ Nudge() }

// nudgeWebhooks nudges Config.Webhooks, when set.
func (s *Server) nudgeWebhooks() {
	if s.cfg.Webhooks != nil {
		s.cfg.Webhooks.Nudge()
	}
}

// nudgeDependencies nudges Config.Dependencies, when set.
func (s *Server) nudgeDependencies() {
	if s.cfg.Dependencies != nil {
		s.cfg.Dependencies.Nudge()
	}
}

// withRelations fills the relation fields (blockedBy, blocks,
// unresolvedBlockerIssueIds) of the issues an endpoint answers, v being
// what it returned: an issue, a list of issues or a heartbeat context;
// other answers are left as they are. One read of the edge table for the
// whole answer (store.IssueRelations), per company, of the issues whose
// row counts an edge (RelationCount above 0); an issue with none gets
// empty lists without a read.
func (s *Server) withRelations(ctx context.Context, v any) error {
	var issues []*clasp.Issue
	switch v := v.(type) {
	case *clasp.Issue:
		issues = []*clasp.Issue{v}
	case []*clasp.Issue:
		issues = v
	case *heartbeatContextOut:
		return s.hbRelations(ctx, v)
	default:
		return nil
	}
	byCompany := map[string][]string{}
	for _, iss := range issues {
		if iss != nil && iss.RelationCount > 0 {
			byCompany[iss.CompanyID] = append(byCompany[iss.CompanyID], iss.ID)
		}
	}
	rels := map[string]*clasp.IssueRelations{}
	for company, ids := range byCompany {
		m, err := s.st.IssueRelations(ctx, company, ids)
		if err != nil {
			return err
		}
		for id, r := range m {
			rels[id] = r
		}
	}
	for _, iss := range issues {
		if iss != nil {
			iss.SetRelations(rels[iss.ID])
		}
	}
	return nil
}

// hbRelations fills a heartbeat context's issue relations and its
// ancestors (the parent first, up to the top; [] for a top-level issue),
// without a read for a top-level issue with no edge.
func (s *Server) hbRelations(ctx context.Context, out *heartbeatContextOut) error {
	iss := out.Issue.Issue
	if iss.RelationCount == 0 && iss.ParentID == nil {
		iss.SetRelations(nil)
		out.Ancestors = []clasp.IssueSummary{}
		return nil
	}
	m, err := s.st.IssueRelations(ctx, iss.CompanyID, []string{iss.ID})
	if err != nil {
		return err
	}
	r := m[iss.ID]
	iss.SetRelations(r)
	out.Ancestors = []clasp.IssueSummary{}
	if r != nil && r.Ancestors != nil {
		out.Ancestors = r.Ancestors
	}
	return nil
}
