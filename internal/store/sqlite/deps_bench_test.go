package sqlite

import (
	"context"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/clasp-dev/clasp"
	"github.com/clasp-dev/clasp/internal/store"
)

// BenchmarkDepCycleCheck measures a PATCH whose new blocker closes a cycle
// through a chain of 10,000 blockers (RULES.md, D3): one walk by
// issue_blockers' primary key that answers the identifiers, and the cycle
// named in the error; one op is one refused PATCH (its write transaction
// rolled back). The chain is written in bulk (the triggers keep its
// counts).
//
//	go test -run '^$' -bench DepCycleCheck ./internal/store/sqlite/
func BenchmarkDepCycleCheck(b *testing.B) {
	ctx := context.Background()
	s := openTest(b, Options{Synchronous: "NORMAL"})
	co, err := s.CompanyCreate(ctx, &store.CompanyCreateParams{Name: "Bench", IssuePrefix: "BENCH", Actor: board})
	if err != nil {
		b.Fatal(err)
	}
	const n = 10000
	now := time.Now().UnixMicro()
	for _, q := range []string{
		`WITH RECURSIVE g(k) AS (SELECT 1 UNION ALL SELECT k + 1 FROM g WHERE k < ?2)
		INSERT INTO issues (id, company_id, identifier, title, status, priority, priority_rank, created_at, updated_at)
		SELECT 'dep-' || k, ?1, 'BENCH-' || k, 'bench', 'todo', 'low', 3, ?3, ?3 FROM g`,
		`WITH RECURSIVE g(k) AS (SELECT 2 UNION ALL SELECT k + 1 FROM g WHERE k < ?2)
		INSERT INTO issue_blockers (company_id, issue_id, blocker_issue_id, created_at)
		SELECT ?1, 'dep-' || k, 'dep-' || (k - 1), ?3 FROM g`,
		`UPDATE companies SET issue_counter = ?2 WHERE id = ?1`,
		`ANALYZE`,
	} {
		if _, err := s.d.w.ExecContext(ctx, q, co.ID, n, now); err != nil {
			b.Fatal(err)
		}
	}
	blockers := []string{"BENCH-" + strconv.Itoa(n)}
	p := &store.IssueUpdateParams{Ref: "BENCH-1", BlockedByIssueIDs: &blockers, Actor: board}
	coID := co.ID
	b.Run("cycle", func(b *testing.B) {
		var lat []time.Duration
		for b.Loop() {
			t0 := time.Now()
			_, err := s.IssueUpdate(ctx, p)
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
		y, err := s.IssueCreate(ctx, &store.IssueCreateParams{CompanyID: coID, Title: "y", Actor: board})
		if err != nil {
			b.Fatal(err)
		}
		none := []string{}
		var lat []time.Duration
		for b.Loop() {
			t0 := time.Now()
			_, err := s.IssueUpdate(ctx, &store.IssueUpdateParams{Ref: y.ID, BlockedByIssueIDs: &blockers, Actor: board})
			lat = append(lat, time.Since(t0))
			if err != nil {
				b.Fatal(err)
			}
			if _, err := s.IssueUpdate(ctx, &store.IssueUpdateParams{Ref: y.ID, BlockedByIssueIDs: &none, Actor: board}); err != nil {
				b.Fatal(err)
			}
		}
		reportPercentiles(b, lat)
	})
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
