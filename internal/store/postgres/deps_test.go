package postgres

import (
	"context"
	"testing"
	"time"

	"github.com/clasp-dev/clasp"
	"github.com/clasp-dev/clasp/internal/store"
)

// The two interleavings of an edge change of issue I on blocker B with a
// status change of B (schema v15's comment, RULES.md D5), forced with an
// open transaction: whichever locks B first, I's count is that of the
// serial order. (a) The edge's transaction holds B FOR SHARE and commits
// while B's move to done waits: the move's count update, a statement
// with a new snapshot, sees the edge and uncounts it. (b) B's move to done
// holds B's row and commits while the edge waits for it: the edge reads B
// done and does not count it.
func TestDepEdgeAgainstBlockerStatus(t *testing.T) {
	t.Parallel()
	s := openTest(t, Options{})
	ctx := t.Context()
	co, err := s.CompanyCreate(ctx, &store.CompanyCreateParams{Name: "D", IssuePrefix: "DEP", Actor: board})
	if err != nil {
		t.Fatal(err)
	}
	newIssue := func() *clasp.Issue {
		iss, err := s.IssueCreate(ctx, &store.IssueCreateParams{CompanyID: co.ID, Title: "t", Status: clasp.IssueTodo, Actor: board})
		if err != nil {
			t.Fatal(err)
		}
		return iss
	}
	done := clasp.IssueDone
	wantCounts := func(what string, i *clasp.Issue, want int) {
		t.Helper()
		got, err := s.IssueGet(ctx, "", i.ID)
		if err != nil {
			t.Fatal(err)
		}
		if got.UnresolvedBlockerCount != want {
			t.Errorf("%s: unresolvedBlockerCount %d, want %d", what, got.UnresolvedBlockerCount, want)
		}
		if bad, err := s.DepCountsMismatch(ctx, co.ID); err != nil || len(bad) > 0 {
			t.Errorf("%s: counts %v, %v", what, bad, err)
		}
	}

	t.Run("edge first", func(t *testing.T) {
		b, i := newIssue(), newIssue()
		tx, err := s.d.pool.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer tx.Rollback(context.WithoutCancel(ctx))
		if err := store.ApplyDeps(ctx, pooled{tx}, s.d, &store.DepChange{CompanyID: co.ID, IssueID: i.ID, Identifier: i.Identifier,
			Blockers: &[]string{b.ID}, Actor: board}); err != nil {
			t.Fatal(err)
		}
		moved := make(chan error, 1)
		go func() {
			_, err := s.IssueUpdate(ctx, &store.IssueUpdateParams{Ref: b.ID, Status: &done, Actor: board})
			moved <- err
		}()
		select {
		case err := <-moved:
			t.Fatalf("the move of B to done did not wait for the edge's lock of B: %v", err)
		case <-time.After(200 * time.Millisecond):
		}
		if err := tx.Commit(ctx); err != nil {
			t.Fatal(err)
		}
		if err := <-moved; err != nil {
			t.Fatal(err)
		}
		wantCounts("edge, then B done", i, 0)
	})

	t.Run("status first", func(t *testing.T) {
		b, i := newIssue(), newIssue()
		tx, err := s.d.pool.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer tx.Rollback(context.WithoutCancel(ctx))
		if _, err := tx.Exec(ctx, `UPDATE issues SET status = 'done', completed_at = now() WHERE id = $1`, b.ID); err != nil {
			t.Fatal(err)
		}
		added := make(chan error, 1)
		go func() {
			_, err := s.IssueUpdate(ctx, &store.IssueUpdateParams{Ref: i.ID, BlockedByIssueIDs: &[]string{b.ID}, Actor: board})
			added <- err
		}()
		select {
		case err := <-added:
			t.Fatalf("the edge did not wait for B's status change: %v", err)
		case <-time.After(200 * time.Millisecond):
		}
		if err := tx.Commit(ctx); err != nil {
			t.Fatal(err)
		}
		if err := <-added; err != nil {
			t.Fatal(err)
		}
		wantCounts("B done, then the edge", i, 0)
	})
}
