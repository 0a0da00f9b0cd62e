package postgres

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/clasp-dev/clasp"
	"github.com/clasp-dev/clasp/internal/store"
)

// BenchmarkDepCycleCheck measures a PATCH whose new blocker closes a cycle
// through a chain of 10,000 blockers (RULES.md, D3): the company's
// dependency lock, the walk down the chain by issue_blockers' primary key,
// and the naming of the cycle; one op is one refused PATCH. The chain is
// written in bulk (the triggers keep its counts). Needs
// CLASP_TEST_POSTGRES_URL.
//
//	go test -run '^$' -bench DepCycleCheck ./internal/store/postgres/
func BenchmarkDepCycleCheck(b *testing.B) {
	e := newBenchEnv(b, 4)
	ctx := context.Background()
	const n = 10000
	bulkIssues(b, e, n, "low", "")
	if _, err := e.s.d.pool.Exec(ctx, `INSERT INTO issue_blockers (company_id, issue_id, blocker_issue_id)
		SELECT $1, 'dep-' || g, 'dep-' || (g - 1) FROM generate_series(2, $2::integer) g`, e.co.ID, n); err != nil {
		b.Fatal(err)
	}
	analyze(b, e)
	// dep-1 blocked by dep-N closes dep-1 <- dep-2 <- ... <- dep-N
	blockers := []string{"BENCH-" + strconv.Itoa(n)}
	p := &store.IssueUpdateParams{Ref: "BENCH-1", BlockedByIssueIDs: &blockers, Actor: board}
	coID := e.co.ID
	b.Run("cycle", func(b *testing.B) {
		var lat []time.Duration
		for b.Loop() {
			t0 := time.Now()
			_, err := e.s.IssueUpdate(ctx, p)
			lat = append(lat, time.Since(t0))
			if clasp.ErrorCode(err) != clasp.CodeDependencyCycle {
				b.Fatalf("got %v, want dependency_cycle", err)
			}
		}
		reportPercentiles(b, lat)
	})
	// no cycle: a new issue blocked by the chain's end walks the whole
	// chain and does not find itself; each op also removes the edge again
	// (not timed in the percentiles)
	b.Run("no_cycle", func(b *testing.B) {
		y, err := e.s.IssueCreate(ctx, &store.IssueCreateParams{CompanyID: coID, Title: "y", Actor: board})
		if err != nil {
			b.Fatal(err)
		}
		none := []string{}
		var lat []time.Duration
		for b.Loop() {
			t0 := time.Now()
			_, err := e.s.IssueUpdate(ctx, &store.IssueUpdateParams{Ref: y.ID, BlockedByIssueIDs: &blockers, Actor: board})
			lat = append(lat, time.Since(t0))
			if err != nil {
				b.Fatal(err)
			}
			if _, err := e.s.IssueUpdate(ctx, &store.IssueUpdateParams{Ref: y.ID, BlockedByIssueIDs: &none, Actor: board}); err != nil {
				b.Fatal(err)
			}
		}
		reportPercentiles(b, lat)
	})
}

// BenchmarkDepClaim measures claim-next (and the release that gives the
// issue back, unassigned) in a company of BENCH_DEPS_ISSUES issues
// (default 200,000) with and without BENCH_DEPS_EDGES blocker edges
// (default a fifth of the issues): each edge blocks one of the most urgent
// issues (critical), which the claim must pass over (RULES.md, D7). The
// claimable issues are of low priority. Compare p99 of edges=0 and
// edges=N.
//
//	BENCH_DEPS_ISSUES=1000000 go test -run '^$' -bench DepClaim ./internal/store/postgres/
func BenchmarkDepClaim(b *testing.B) {
	issues := envInt("BENCH_DEPS_ISSUES", 200000)
	edges := envInt("BENCH_DEPS_EDGES", issues/5)
	for _, withEdges := range []bool{false, true} {
		b.Run(fmt.Sprintf("issues=%d/edges=%d", issues, map[bool]int{false: 0, true: edges}[withEdges]), func(b *testing.B) {
			e := newBenchEnv(b, 4)
			ctx := context.Background()
			other := e.agent(b, "blocker-owner")
			// the blockers: todo issues of another agent, never claimable
			bulkIssues(b, e, 1000, "medium", other.ID)
			// the most urgent issues, blocked when withEdges
			bulkIssuesFrom(b, e, 1001, edges, "critical", "")
			bulkIssuesFrom(b, e, 1001+edges, issues-edges-1000, "low", "")
			if withEdges {
				if _, err := e.s.d.pool.Exec(ctx, `INSERT INTO issue_blockers (company_id, issue_id, blocker_issue_id)
					SELECT $1, 'dep-' || g, 'dep-' || (1 + g % 1000) FROM generate_series(1001, 1000 + $2::integer) g`,
					e.co.ID, edges); err != nil {
					b.Fatal(err)
				}
			}
			analyze(b, e)
			a := e.agent(b, "claimer")
			actor := e.run(b, a)
			var lat []time.Duration
			for b.Loop() {
				t0 := time.Now()
				iss, err := e.s.IssueClaim(ctx, &store.IssueClaimParams{Scope: store.ClaimUnassigned, Actor: actor})
				lat = append(lat, time.Since(t0))
				if err != nil || iss == nil {
					b.Fatalf("claim: %v, %v", iss, err)
				}
				if withEdges && iss.Priority == clasp.PriorityCritical {
					b.Fatalf("claimed blocked issue %s", iss.Identifier)
				}
				if _, err := e.s.IssueRelease(ctx, &store.IssueReleaseParams{Ref: iss.Identifier, Unassign: true, Actor: actor}); err != nil {
					b.Fatal(err)
				}
			}
			reportPercentiles(b, lat)
		})
	}
}

// bulkIssues writes n todo issues dep-1..dep-n (identifiers BENCH-1..)
// of priority prio and assignee ("" none) in one statement.
func bulkIssues(b testing.TB, e *benchEnv, n int, prio, assignee string) {
	bulkIssuesFrom(b, e, 1, n, prio, assignee)
}

// bulkIssuesFrom writes issues dep-from..dep-(from+n-1).
func bulkIssuesFrom(b testing.TB, e *benchEnv, from, n int, prio, assignee string) {
	b.Helper()
	rank := map[string]int{"critical": 0, "high": 1, "medium": 2, "low": 3}[prio]
	var a any
	if assignee != "" {
		a = assignee
	}
	ctx := context.Background()
	if _, err := e.s.d.pool.Exec(ctx, `INSERT INTO issues (id, company_id, identifier, title, status, priority, priority_rank,
			assignee_agent_id, created_at, updated_at)
		SELECT 'dep-' || g, $1, 'BENCH-' || g, 'bench', 'todo', $2, $3, $4, now(), now()
		FROM generate_series($5::integer, $5::integer + $6::integer - 1) g`, e.co.ID, prio, rank, a, from, n); err != nil {
		b.Fatal(err)
	}
	if _, err := e.s.d.pool.Exec(ctx, `UPDATE companies SET issue_counter = greatest(issue_counter, $2) WHERE id = $1`,
		e.co.ID, from+n-1); err != nil {
		b.Fatal(err)
	}
}

// analyze vacuums the bulk-written tables and takes their statistics,
// as autovacuum does in a steady state: the edges' counts rewrote the
// blocked issues, whose earlier versions' entries would otherwise stay in
// the claim's index until a vacuum.
func analyze(b testing.TB, e *benchEnv) {
	b.Helper()
	for _, q := range []string{`VACUUM ANALYZE issues`, `VACUUM ANALYZE issue_blockers`} {
		if _, err := e.s.d.pool.Exec(context.Background(), q); err != nil {
			b.Fatal(err)
		}
	}
}

// reportPercentiles reports the p50 and p99 of lat in ms.
func reportPercentiles(b *testing.B, lat []time.Duration) {
	if len(lat) == 0 {
		return
	}
	slices.Sort(lat)
	b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1000, "p50_ms")
	b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds())/1000, "p99_ms")
}

// envInt is the integer environment variable name, or def.
func envInt(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil && v > 0 {
		return v
	}
	return def
}
