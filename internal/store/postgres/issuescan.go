package postgres

import (
	"fmt"
	"time"

	"github.com/clasp-dev/clasp"
	"github.com/jackc/pgx/v5/pgtype"
)

// issueRow is the scan destination of an issue's columns (store.IssueCols)
// in a PostgreSQL answer: the strings and integers straight into the
// issue, the times into pgtype.Timestamptz values, which pgx decodes
// without allocating (store.Time and store.NullTime go through
// database/sql's Scanner, a boxed time.Time and a new *time.Time per
// column). done then stores the times into the issue as those do: in
// UTC, NULL as nil.
type issueRow struct {
	iss                                     *clasp.Issue
	lockedAt, started, completed, cancelled pgtype.Timestamptz
	created, updated                        pgtype.Timestamptz
}

// appendDest appends the scan destinations of store.IssueCols, in order,
// to dst and returns it.
func (r *issueRow) appendDest(dst []any, i *clasp.Issue) []any {
	r.iss = i
	return append(dst, &i.ID, &i.CompanyID, &i.Identifier, &i.Title, &i.Description, &i.Status, &i.Priority, &i.AssigneeAgentID,
		&i.CheckoutRunID, &i.CheckoutEpoch, &i.ExecutionRunID, &i.ExecutionAgentNameKey, &r.lockedAt,
		&r.started, &r.completed, &r.cancelled, &r.created, &r.updated, &i.ParentID, &i.UnresolvedBlockerCount, &i.CompletedEpoch, &i.RelationCount)
}

// done stores the scanned times into the issue; the nullable ones share
// one allocation. The errors are store.Time's and store.NullTime's: NULL in
// a NOT NULL column, and an infinite timestamp (which they receive as a
// string).
func (r *issueRow) done() error {
	r.iss.DependencyReady = r.iss.UnresolvedBlockerCount == 0 // D1
	var (
		ts   *[4]time.Time
		dsts = [...]**time.Time{&r.iss.ExecutionLockedAt, &r.iss.StartedAt, &r.iss.CompletedAt, &r.iss.CancelledAt}
	)
	for k, v := range [...]*pgtype.Timestamptz{&r.lockedAt, &r.started, &r.completed, &r.cancelled} {
		if !v.Valid {
			*dsts[k] = nil
			continue
		}
		if v.InfinityModifier != pgtype.Finite {
			return errInfiniteTime
		}
		if ts == nil {
			ts = new([4]time.Time)
		}
		ts[k] = v.Time.UTC()
		*dsts[k] = &ts[k]
	}
	for _, c := range [...]struct {
		v *pgtype.Timestamptz
		t *time.Time
	}{{&r.created, &r.iss.CreatedAt}, {&r.updated, &r.iss.UpdatedAt}} {
		switch {
		case !c.v.Valid:
			return fmt.Errorf("scan time: NULL in a NOT NULL column")
		case c.v.InfinityModifier != pgtype.Finite:
			return errInfiniteTime
		}
		*c.t = c.v.Time.UTC()
	}
	return nil
}

// errInfiniteTime is store.Time's error for an infinite timestamp.
var errInfiniteTime = fmt.Errorf("scan time: unsupported column value of type string")
