package sqlite

import (
	"context"
	"database/sql"
	"path/filepath"
	"strings"
	"testing"
)

// TestClaimPlanUsesIndexes pins the query plan of claim-next: the
// pick reads the unassigned issues through issues_claim_unassigned and the
// agent's through issues_assignee_status, each range in index order (no
// sort of the issues: only the few picks are sorted), so a claim costs the
// same with 1,000 or 1,000,000 issues.
func TestClaimPlanUsesIndexes(t *testing.T) {
	ctx := context.Background()
	sDrv, err := Open(ctx, filepath.Join(t.TempDir(), "plan.db"), Options{Synchronous: "NORMAL"})
	if err != nil {
		t.Fatal(err)
	}
	s := newTestStore(sDrv)
	defer s.Close()
	rows, err := s.d.w.QueryContext(ctx, "EXPLAIN QUERY PLAN "+s.d.sqlText["Claim"],
		sql.Named("company", "c"), sql.Named("unassigned", `["todo"]`), sql.Named("mine", `["todo","in_progress"]`),
		sql.Named("agent", "a"), sql.Named("run", "r"), sql.Named("now", 0))
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var plan []string
	for rows.Next() {
		var id, parent, unused int
		var detail string
		if err := rows.Scan(&id, &parent, &unused, &detail); err != nil {
			t.Fatal(err)
		}
		plan = append(plan, detail)
	}
	text := strings.Join(plan, "\n")
	for _, want := range []string{
		"SEARCH i USING INDEX issues_claim_unassigned (company_id=? AND status=?)",
		"SEARCH i USING INDEX issues_assignee_status (assignee_agent_id=? AND status=?)",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("claim plan lacks %q:\n%s", want, text)
		}
	}
	if strings.Contains(text, "SCAN i") || strings.Contains(text, "SCAN issues") {
		t.Errorf("claim plan scans the issues table:\n%s", text)
	}
	t.Logf("claim plan:\n%s", text)
}
