package sqlite

// Server instances (store.HeartbeatStore.Instance*), statements in
// sql/instance.sql: each `clasp serve` process that runs managed agents
// holds a row with a lease; runs.host_id names the instance that owns the
// run's process.

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"github.com/clasp-dev/clasp/internal/store"
)

// InstanceRegister records (or replaces) instance in with a lease of ttl.
func (s *Store) InstanceRegister(ctx context.Context, in *store.Instance, ttl time.Duration) error {
	return s.write(ctx, func(tx *wtx) error {
		_, err := tx.exec(ctx, "InstanceRegister", sql.Named("id", in.ID), sql.Named("host", in.Host), sql.Named("pid", in.PID),
			sql.Named("proc_start", in.ProcStart), sql.Named("now", tx.now), sql.Named("ttl", ttl.Microseconds()))
		return wrap(err, "register instance %s", in.ID)
	})
}

// InstanceRenew extends instance id's lease to ttl from now; 404 not_found when it is gone.
func (s *Store) InstanceRenew(ctx context.Context, id string, ttl time.Duration) error {
	return s.write(ctx, func(tx *wtx) error {
		res, err := tx.exec(ctx, "InstanceRenew", sql.Named("id", id), sql.Named("now", tx.now), sql.Named("ttl", ttl.Microseconds()))
		if err != nil {
			return fmt.Errorf("renew instance %s: %w", id, err)
		}
		if n, _ := res.RowsAffected(); n == 0 {
			return notFound("instance", id)
		}
		return nil
	})
}

// InstanceRelease ends instance id's lease now.
func (s *Store) InstanceRelease(ctx context.Context, id string) error {
	return s.write(ctx, func(tx *wtx) error {
		_, err := tx.exec(ctx, "InstanceRelease", sql.Named("id", id), sql.Named("now", tx.now))
		return wrap(err, "release instance %s", id)
	})
}

// InstanceList lists the instances of host.
func (s *Store) InstanceList(ctx context.Context, host string) ([]*store.Instance, error) {
	rows, err := s.read(ctx, "InstanceList", sql.Named("host", host), sql.Named("now", s.nowMicros()))
	if err != nil {
		return nil, translate(fmt.Errorf("list instances of %s: %w", host, err))
	}
	out, err := scanAll(rows, func(sc store.Row) (*store.Instance, error) {
		var in store.Instance
		var started, expires int64
		if err := sc.Scan(&in.ID, &in.Host, &in.PID, &in.ProcStart, &started, &expires, &in.Expired); err != nil {
			return nil, err
		}
		in.StartedAt, in.LeaseExpiresAt = fromMicros(started), fromMicros(expires)
		return &in, nil
	})
	return out, translate(wrap(err, "list instances of %s", host))
}

// InstanceTakeOver takes instance dead over for by (store.HeartbeatStore.InstanceTakeOver).
func (s *Store) InstanceTakeOver(ctx context.Context, dead *store.Instance, by string) (runs []*store.ManagedRun, ok bool, err error) {
	if err := store.CheckTakeOver(dead, by); err != nil {
		return nil, false, err
	}
	err = s.write(ctx, func(tx *wtx) error {
		runs, ok = nil, false
		res, err := tx.exec(ctx, "InstanceTakeOver", sql.Named("id", dead.ID), sql.Named("lease", micros(dead.LeaseExpiresAt)))
		if err != nil {
			return fmt.Errorf("take over instance %s: %w", dead.ID, err)
		}
		if n, _ := res.RowsAffected(); n == 0 {
			return nil
		}
		ok = true
		rows, err := tx.query(ctx, "InstanceRunsWithProcess", sql.Named("host", dead.ID))
		if err != nil {
			return fmt.Errorf("list runs of instance %s: %w", dead.ID, err)
		}
		if runs, err = scanAll(rows, scanManaged); err != nil {
			return err
		}
		_, err = tx.exec(ctx, "InstanceMoveRuns", sql.Named("by", by), sql.Named("dead", dead.ID))
		return wrap(err, "move runs of instance %s", dead.ID)
	})
	if err != nil {
		return nil, false, err
	}
	return runs, ok, nil
}
