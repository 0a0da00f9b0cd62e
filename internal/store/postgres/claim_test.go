package postgres

import (
	"context"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/clasp-dev/clasp"
	"github.com/clasp-dev/clasp/internal/store"
)

// TestClaimPlanUsesIndexes pins the query plan of claim-next
// over 20,000 issues of which 10,000 are assigned to other agents: the
// unassigned range is read through issues_claim_unassigned and the
// agent's own through issues_assignee_status, in index order (no Sort of
// issues, no scan of the table), with LockRows (FOR UPDATE SKIP LOCKED)
// under each range's Limit, so a claim costs the same with 1,000 or
// 1,000,000 issues. The statement gets one generic plan per connection
// (claimPlannedOnce).
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
	if _, err := s.d.pool.Exec(ctx, `INSERT INTO issues (id, company_id, identifier, title, status, priority, priority_rank, assignee_agent_id, created_at, updated_at)
		SELECT 'i' || g, $1, 'PLAN-' || g, 't', CASE WHEN g % 4 = 0 THEN 'done' ELSE 'todo' END, 'medium', g % 4,
			CASE WHEN g % 2 = 0 THEN $2 END, now() - g * interval '1 second', now()
		FROM generate_series(1, 20000) g`, co.ID, other.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := s.d.pool.Exec(ctx, `ANALYZE issues`); err != nil {
		t.Fatal(err)
	}
	claimPlannedOnce(t, s.d, co.ID, ag.ID)
	tx, err := s.d.pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	args := actorArgs(namedArgs{"run": "r", "agent": ag.ID, "unassigned": []string{"todo"}, "mine": []string{"todo", "in_progress"}},
		store.Actor{Type: clasp.ActorAgent, AgentID: ag.ID, CompanyID: co.ID, RunID: "r"})
	text := explainPlan(ctx, t, tx, "Claim", args)
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

// claimPlannedOnce checks that the claim statement, run again and again
// on one connection (prepared, as the store runs it) over the issues of
// company co, gets PostgreSQL's generic plan, planned once per connection,
// for a claim of unassigned issues (an empty @mine) and for one of both
// scopes: a plan per call cost more than the statement's execution.
func claimPlannedOnce(t *testing.T, s *Driver, co, agent string) {
	ctx := context.Background()
	for _, tc := range []struct {
		name             string
		unassigned, mine []string
	}{
		{"unassigned", []string{"todo"}, []string{}},
		{"any", []string{"todo", "backlog"}, []string{"todo", "backlog", "in_progress"}},
	} {
		conn, err := pgx.ConnectConfig(ctx, s.pool.Config().ConnConfig.Copy()) // a session of its own: plan counts from zero
		if err != nil {
			t.Fatal(err)
		}
		args := actorArgs(namedArgs{"run": "no-such-run", "agent": agent, "unassigned": tc.unassigned, "mine": tc.mine},
			store.Actor{Type: clasp.ActorAgent, AgentID: agent, CompanyID: co, RunID: "no-such-run"})
		for range 12 {
			rows, err := conn.Query(ctx, q("Claim"), args)
			if err != nil {
				t.Fatal(err)
			}
			rows.Close()
			if err := rows.Err(); err != nil {
				t.Fatal(err)
			}
		}
		var generic, custom int64
		if err := conn.QueryRow(ctx, `SELECT coalesce(sum(generic_plans), 0), coalesce(sum(custom_plans), 0) FROM pg_prepared_statements
			WHERE statement LIKE '%FOR UPDATE OF i SKIP LOCKED%'`).Scan(&generic, &custom); err != nil {
			t.Fatal(err)
		}
		conn.Close(ctx)
		if generic == 0 {
			t.Errorf("%s: 12 claims on one connection got %d generic and %d custom plans, want the generic plan", tc.name, generic, custom)
		}
	}
}
