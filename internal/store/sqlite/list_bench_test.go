package sqlite

import (
	"context"
	"fmt"
	"testing"

	"github.com/clasp-dev/clasp/internal/store"
)

// BenchmarkIssueListQuery lists a company of 20,000 issues, one title in ten
// not ASCII, by a query that matches none of them, so that every title and
// identifier is compared (the case-insensitive search of IssueList,
// Driver.LikeFold).
func BenchmarkIssueListQuery(b *testing.B) {
	ctx := context.Background()
	s := openTest(b, Options{Synchronous: "NORMAL"})
	co, err := s.CompanyCreate(ctx, &store.CompanyCreateParams{Name: "Bench", IssuePrefix: "BENCH", Actor: board})
	if err != nil {
		b.Fatal(err)
	}
	const n = 20000
	if _, err := s.d.w.ExecContext(ctx, `WITH RECURSIVE k(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM k WHERE i < ?)
		INSERT INTO issues (id, company_id, identifier, title, status, priority, priority_rank, created_at, updated_at)
		SELECT printf('00000000-0000-7000-8000-%012d', i), ?, 'BENCH-' || i,
			CASE WHEN i % 10 = 0 THEN 'Ünïcode title number ' ELSE 'Plain title number ' END || i,
			'todo', 'medium', 2, i, i FROM k`, n, co.ID); err != nil {
		b.Fatal(err)
	}
	p := &store.IssueListParams{CompanyID: co.ID, Query: "no such words", Page: store.Page{Limit: 100}}
	b.ResetTimer()
	for b.Loop() {
		got, _, err := s.IssueList(ctx, p)
		if err != nil || len(got) != 0 {
			b.Fatal(fmt.Sprint(len(got), err))
		}
	}
}
