package postgres

// Server instances (store.HeartbeatStore.Instance*), statements in
// sql/instance.sql: each `clasp serve` process that runs managed agents
// holds a row with a lease; runs.host_id names the instance that owns the
// run's process.

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/clasp-dev/clasp/internal/store"
)

// InstanceRegister records (or replaces) instance in with a lease of ttl.
func (s *Store) InstanceRegister(ctx context.Context, in *store.Instance, ttl time.Duration) error {
	_, err := s.pool.Exec(ctx, q("InstanceRegister"), namedArgs{"id": in.ID, "host": in.Host, "pid": in.PID,
		"proc_start": in.ProcStart, "ttl_us": ttl.Microseconds()})
	return translate(wrap(err, "register instance %s", in.ID))
}

// InstanceRenew extends instance id's lease to ttl from now; 404 not_found when it is gone.
func (s *Store) InstanceRenew(ctx context.Context, id string, ttl time.Duration) error {
	tag, err := s.pool.Exec(ctx, q("InstanceRenew"), namedArgs{"id": id, "ttl_us": ttl.Microseconds()})
	if err != nil {
		return translate(fmt.Errorf("renew instance %s: %w", id, err))
	}
	if tag.RowsAffected() == 0 {
		return notFound("instance", id)
	}
	return nil
}

// InstanceRelease ends instance id's lease now.
func (s *Store) InstanceRelease(ctx context.Context, id string) error {
	_, err := s.pool.Exec(ctx, q("InstanceRelease"), namedArgs{"id": id})
	return translate(wrap(err, "release instance %s", id))
}

// InstanceList lists the instances of host.
func (s *Store) InstanceList(ctx context.Context, host string) ([]*store.Instance, error) {
	rows, err := s.pool.Query(ctx, q("InstanceList"), namedArgs{"host": host})
	if err != nil {
		return nil, translate(fmt.Errorf("list instances of %s: %w", host, err))
	}
	out, err := store.ScanAll(rows, func(sc store.Row) (*store.Instance, error) {
		var in store.Instance
		return &in, sc.Scan(&in.ID, &in.Host, &in.PID, &in.ProcStart, &in.StartedAt, &in.LeaseExpiresAt, &in.Expired)
	})
	return out, translate(wrap(err, "list instances of %s", host))
}

// InstanceTakeOver takes instance dead over for by (store.HeartbeatStore.InstanceTakeOver).
func (s *Store) InstanceTakeOver(ctx context.Context, dead *store.Instance, by string) (runs []*store.ManagedRun, ok bool, err error) {
	if err := store.CheckTakeOver(dead, by); err != nil {
		return nil, false, err
	}
	err = s.tx(ctx, func(tx pgx.Tx) error {
		runs, ok = nil, false
		tag, err := tx.Exec(ctx, q("InstanceTakeOver"), namedArgs{"id": dead.ID, "lease": dead.LeaseExpiresAt})
		if err != nil {
			return fmt.Errorf("take over instance %s: %w", dead.ID, err)
		}
		if tag.RowsAffected() == 0 {
			return nil
		}
		ok = true
		rows, err := tx.Query(ctx, q("InstanceRunsWithProcess"), namedArgs{"host": dead.ID})
		if err != nil {
			return fmt.Errorf("list runs of instance %s: %w", dead.ID, err)
		}
		if runs, err = store.ScanAll(rows, scanManaged); err != nil {
			return err
		}
		_, err = tx.Exec(ctx, q("InstanceMoveRuns"), namedArgs{"by": by, "dead": dead.ID})
		return wrap(err, "move runs of instance %s", dead.ID)
	})
	if err != nil {
		return nil, false, translate(err)
	}
	return runs, ok, nil
}
