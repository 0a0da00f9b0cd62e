package sqlite

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/clasp-dev/clasp"
	"github.com/clasp-dev/clasp/internal/store"
)

var _ store.ActivityStream = (*Driver)(nil)

// WatchActivity implements store.ActivityStream. On SQLite the single
// writer is in this process, so an in-process signal after each commit
// that wrote activity (write's s.watch.Notify) reaches every watcher.
func (s *Driver) WatchActivity(ctx context.Context) <-chan struct{} {
	return s.watch.Watch(ctx.Done())
}

// ActivityAfter implements store.ActivityStream. On SQLite the single
// writer assigns ids in commit order, so there are no holes to wait for:
// through is the last row's id (afterID when there is none).
func (s *Driver) ActivityAfter(ctx context.Context, companyID string, afterID int64, limit int) ([]*clasp.Activity, int64, error) {
	rows, err := s.read(ctx, "ActivityAfter", sql.Named("company", companyID), sql.Named("after", afterID), sql.Named("limit", store.PageLimit(limit)))
	if err != nil {
		return nil, afterID, translate(fmt.Errorf("read activity after %d: %w", afterID, err))
	}
	list, err := scanAll(rows, store.ScanActivity)
	if err != nil {
		return nil, afterID, translate(fmt.Errorf("read activity after %d: %w", afterID, err))
	}
	through := afterID
	if len(list) > 0 {
		through = list[len(list)-1].ID
	}
	return list, through, nil
}

// ActivityLatestID implements store.ActivityStream.
func (s *Driver) ActivityLatestID(ctx context.Context, companyID string) (int64, error) {
	var id int64
	if err := s.readRow(ctx, "ActivityLatestID", sql.Named("company", companyID)).Scan(&id); err != nil {
		return 0, translate(fmt.Errorf("read latest activity id: %w", err))
	}
	return id, nil
}
