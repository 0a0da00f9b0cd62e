package sqlite

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"

	"github.com/clasp-dev/clasp"
	"github.com/clasp-dev/clasp/internal/store"
)

// TestDatabaseFull caps the database file (PRAGMA max_page_count on the
// writer, which SQLite answers with SQLITE_FULL, as a full disk) while 8
// goroutines create issues, so that full batches of group commit meet it:
// every write is committed or answered 503 unavailable with reason
// disk_full, never another error; reads keep working; the issues counted
// are exactly those acknowledged; and once the cap is lifted the same
// store writes again.
func TestDatabaseFull(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	var logs syncLog
	s := openTest(t, Options{Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	co, err := s.CompanyCreate(ctx, &store.CompanyCreateParams{Name: "Acme", IssuePrefix: "ACME", Actor: board})
	if err != nil {
		t.Fatal(err)
	}
	var pages int64
	if err := s.d.w.QueryRowContext(ctx, "PRAGMA page_count").Scan(&pages); err != nil {
		t.Fatal(err)
	}
	if _, err := s.d.w.ExecContext(ctx, fmt.Sprintf("PRAGMA max_page_count = %d", pages+40)); err != nil {
		t.Fatal(err)
	}
	desc := strings.Repeat("d", 3000)
	var mu sync.Mutex
	acked, full := 0, 0
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Go(func() {
			for n := range 40 {
				_, err := s.IssueCreate(ctx, &store.IssueCreateParams{CompanyID: co.ID, Title: fmt.Sprintf("w%d n%d", w, n), Description: desc, Actor: board})
				mu.Lock()
				switch e := clasp.AsError(err); {
				case err == nil:
					acked++
				case e != nil && e.Code == clasp.CodeUnavailable && e.Details["reason"] == ReasonDiskFull:
					full++
				default:
					t.Errorf("issue create on a full database: %v; want nil or 503 disk_full", err)
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if full == 0 {
		t.Fatalf("%d issues of 3 KB fit in 40 pages: the cap never refused a write", acked)
	}
	var listed int
	for cursor := ""; ; {
		items, next, err := s.IssueList(ctx, &store.IssueListParams{CompanyID: co.ID, Page: store.Page{Limit: 100, Cursor: cursor}})
		if err != nil {
			t.Fatalf("read on a full database: %v", err)
		}
		listed += len(items)
		if cursor = next; cursor == "" {
			break
		}
	}
	if listed != acked {
		t.Errorf("%d issues listed, %d acknowledged (%d refused)", listed, acked, full)
	}
	if _, err := s.d.w.ExecContext(ctx, "PRAGMA max_page_count = 4294967294"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.IssueCreate(ctx, &store.IssueCreateParams{CompanyID: co.ID, Title: "after", Description: desc, Actor: board}); err != nil {
		t.Errorf("write after the cap was lifted: %v", err)
	}
	t.Logf("%d acknowledged, %d refused with disk_full; %d writes in %d commits", acked, full, s.d.WriteStats().Writes, s.d.WriteStats().Commits)
	// The operator reads when it began and when it ended, not a line per
	// refused write (a write that still fits may end it and the next
	// refusal begin it again, so a few lines are fine).
	out := logs.String()
	if n := strings.Count(out, "the disk under the database is full"); n == 0 || n > 5 {
		t.Errorf("the disk-full error was logged %d times for %d refusals, want 1 to 5:\n%s", n, full, out)
	}
	if !strings.Contains(out, "writes are committed again") {
		t.Errorf("no log line says writes resumed:\n%s", out)
	}
}

// syncLog is a buffer safe for the concurrent writes of a logger.
type syncLog struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *syncLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *syncLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
