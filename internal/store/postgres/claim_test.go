package postgres

import (
	"context"
	"strings"
	"testing"

	"github.com/clasp-dev/clasp"
	"github.com/clasp-dev/clasp/internal/store"
)

// TestClaimPlanUsesIndexes pins the query plan of claim-next (issue 5)
// over 20,000 issues of which 10,000 are assigned to other agents: the
// unassigned range is read through issues_claim_unassigned and the
// agent's own through issues_assignee_status, in index order (no Sort of
// issues, no scan of the table), with LockRows (FOR UPDATE SKIP LOCKED)
// under each range's Limit, so a claim costs the same with 1,000 or
// 1,000,000 issues.
func TestClaimPlanUsesIndexes(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := openTest(t, Options{})
	co, err := s.CompanyCreate(ctx, &store.CompanyCreateParams{Name: "Plan", IssuePrefix: "PLAN", Actor: store.Actor{Type: clasp.ActorBoard}})
	if err != nil {
		t.Fatal(err)
	}
	ag, err := s.AgentCreate(ctx, &store.AgentCreateParams{CompanyID: co.ID, Name: "a", Actor: store.Actor{Type: clasp.ActorBoard}})
	if err != nil {
		t.Fatal(err)
	}
	other, err := s.AgentCreate(ctx, &store.AgentCreateParams{CompanyID: co.ID, Name: "b", Actor: store.Actor{Type: clasp.ActorBoard}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.pool.Exec(ctx, `INSERT INTO issues (id, company_id, identifier, title, status, priority, priority_rank, assignee_agent_id, created_at, updated_at)
		SELECT 'i' || g, $1, 'PLAN-' || g, 't', CASE WHEN g % 4 = 0 THEN 'done' ELSE 'todo' END, 'medium', g % 4,
			CASE WHEN g % 2 = 0 THEN $2 END, now() - g * interval '1 second', now()
		FROM generate_series(1, 20000) g`, co.ID, other.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := s.pool.Exec(ctx, `ANALYZE issues`); err != nil {
		t.Fatal(err)
	}
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	args := actorArgs(namedArgs{"run": "r", "agent": ag.ID, "unassigned": []string{"todo"}, "mine": []string{"todo", "in_progress"}},
		store.Actor{Type: clasp.ActorAgent, AgentID: ag.ID, CompanyID: co.ID, RunID: "r"})
	rows, err := tx.Query(ctx, "EXPLAIN "+q("Claim"), args)
	if err != nil {
		t.Fatal(err)
	}
	var plan []string
	for rows.Next() {
		var line string
		if err := rows.Scan(&line); err != nil {
			t.Fatal(err)
		}
		plan = append(plan, line)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	text := strings.Join(plan, "\n")
	for _, want := range []string{"issues_claim_unassigned", "issues_assignee_status", "LockRows"} {
		if !strings.Contains(text, want) {
			t.Errorf("claim plan lacks %q:\n%s", want, text)
		}
	}
	if strings.Contains(text, "Seq Scan on runs") || strings.Contains(text, "hashed SubPlan") {
		t.Errorf("claim plan reads every run (a hashed subplan):\n%s", text)
	}
	if strings.Contains(text, "Seq Scan on issues") {
		t.Errorf("claim plan scans the issues table:\n%s", text)
	}
	t.Logf("claim plan:\n%s", text)
}
