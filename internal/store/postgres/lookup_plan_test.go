package postgres

import (
	"context"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/clasp-dev/clasp"
	"github.com/clasp-dev/clasp/internal/store"
)

// TestIssueLookupPlanIgnoresStaleStatistics pins the plan of the
// statements that find one issue by UUID within a company (IssueGet,
// IssueRef, CommentInsert and the lock rules' CTE old) when the statistics are stale: the issues table
// is analyzed while only another company has issues, then company co gets
// one issue and 30,000 more in bulk, with autovacuum off for the table so
// that nothing refreshes the statistics. Each statement, planned for its values as a
// custom plan would be, must find the issue through issues_pkey, never
// through an index whose range is the whole company (which the planner
// believes nearly empty).
func TestIssueLookupPlanIgnoresStaleStatistics(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := openTest(t, Options{})
	board := store.Actor{Type: clasp.ActorBoard}
	co, err := s.CompanyCreate(ctx, &store.CompanyCreateParams{Name: "Stale", IssuePrefix: "STL", Actor: board})
	if err != nil {
		t.Fatal(err)
	}
	other, err := s.CompanyCreate(ctx, &store.CompanyCreateParams{Name: "Other", IssuePrefix: "OTH", Actor: board})
	if err != nil {
		t.Fatal(err)
	}
	const filler = `INSERT INTO issues (id, company_id, identifier, title, status, priority, priority_rank, created_at, updated_at, completed_at)
		SELECT $2 || g, $1, $2 || g, 't', 'done', 'medium', 2, now() - g * interval '1 second', now(), now()
		FROM generate_series(1, $3::int) g`
	if _, err := s.d.pool.Exec(ctx, filler, other.ID, "OTH-F", 2000); err != nil {
		t.Fatal(err)
	}
	for _, stmt := range []string{`ALTER TABLE issues SET (autovacuum_enabled = off)`, `ANALYZE issues`} {
		if _, err := s.d.pool.Exec(ctx, stmt); err != nil {
			t.Fatal(err)
		}
	}
	iss, err := s.IssueCreate(ctx, &store.IssueCreateParams{CompanyID: co.ID, Title: "one", Status: clasp.IssueTodo, Actor: board})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.d.pool.Exec(ctx, filler, co.ID, "STL-F", 30000); err != nil {
		t.Fatal(err)
	}
	args := actorArgs(namedArgs{"rid": iss.ID, "rident": "", "company": co.ID, "run": "r", "agent": "a", "expected": []string{"todo"},
		"status": "done", "board": false, "set_assignee": false, "unassign": false},
		store.Actor{Type: clasp.ActorAgent, AgentID: "a", CompanyID: co.ID, RunID: "r"})
	for _, name := range []string{"IssueGet", "IssueRef", "CommentInsert", "Checkout", "CheckoutWaitersRead", "BoardCheckout", "Release", "Patch", "PatchPlain", "ForceRelease"} {
		text := explainPlan(ctx, t, s.d.pool, name, args)
		if !strings.Contains(text, "using issues_pkey on issues i") {
			t.Errorf("%s: the issue is not looked up by primary key:\n%s", name, text)
		}
		for _, bad := range []string{"issues_company_status_created on issues i", "issues_company_created on issues i", "issues_company_status on issues i", "Seq Scan on issues i"} {
			if strings.Contains(text, bad) {
				t.Errorf("%s: the issue is looked up through %q:\n%s", name, bad, text)
			}
		}
	}
}

// explainPlan returns the text of EXPLAIN of the named statement (q) with
// args on db (a pool or a transaction), one plan line per line; the test
// fails at once when the statement cannot be explained.
func explainPlan(ctx context.Context, t *testing.T, db interface {
	Query(context.Context, string, ...any) (pgx.Rows, error)
}, name string, args namedArgs) string {
	t.Helper()
	rows, err := db.Query(ctx, "EXPLAIN "+q(name), args)
	if err != nil {
		t.Fatalf("EXPLAIN %s: %v", name, err)
	}
	plan, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatalf("EXPLAIN %s: %v", name, err)
	}
	return strings.Join(plan, "\n")
}
