package sqlite

// Server instances (store.HeartbeatStore.Instance*): each `clasp serve`
// process that runs managed agents holds a row with a lease; runs.host_id
// names the instance that owns the run's process.

import (
	"context"
	"fmt"
	"time"

	"github.com/clasp-dev/clasp"
	"github.com/clasp-dev/clasp/internal/store"
)

// InstanceRegister records (or replaces) instance in with a lease of ttl.
func (s *Store) InstanceRegister(ctx context.Context, in *store.Instance, ttl time.Duration) error {
	return s.write(ctx, func(tx *wtx) error {
		_, err := tx.rexec(ctx, `INSERT INTO instances (id, host, pid, proc_start, started_at, lease_expires_at)
			VALUES (?1, ?2, ?3, ?4, ?5, ?5 + ?6)
			ON CONFLICT (id) DO UPDATE SET host = excluded.host, pid = excluded.pid, proc_start = excluded.proc_start,
				started_at = excluded.started_at, lease_expires_at = excluded.lease_expires_at`,
			in.ID, in.Host, in.PID, in.ProcStart, tx.now, ttl.Microseconds())
		if err != nil {
			return fmt.Errorf("register instance %s: %w", in.ID, err)
		}
		return nil
	})
}

// InstanceRenew extends instance id's lease to ttl from now; 404 not_found when it is gone.
func (s *Store) InstanceRenew(ctx context.Context, id string, ttl time.Duration) error {
	return s.write(ctx, func(tx *wtx) error {
		res, err := tx.rexec(ctx, `UPDATE instances SET lease_expires_at = ?1 + ?2 WHERE id = ?3`, tx.now, ttl.Microseconds(), id)
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
		_, err := tx.rexec(ctx, `UPDATE instances SET lease_expires_at = min(lease_expires_at, ?1) WHERE id = ?2`, tx.now, id)
		if err != nil {
			return fmt.Errorf("release instance %s: %w", id, err)
		}
		return nil
	})
}

// InstanceList lists the instances of host.
func (s *Store) InstanceList(ctx context.Context, host string) ([]*store.Instance, error) {
	rows, err := s.r.QueryContext(ctx, `SELECT id, host, pid, proc_start, started_at, lease_expires_at, lease_expires_at <= ?
		FROM instances WHERE host = ? ORDER BY started_at, id`, s.nowMicros(), host)
	if err != nil {
		return nil, translate(fmt.Errorf("list instances of %s: %w", host, err))
	}
	defer rows.Close()
	var out []*store.Instance
	for rows.Next() {
		var in store.Instance
		var started, expires int64
		if err := rows.Scan(&in.ID, &in.Host, &in.PID, &in.ProcStart, &started, &expires, &in.Expired); err != nil {
			return nil, translate(fmt.Errorf("list instances of %s: %w", host, err))
		}
		in.StartedAt, in.LeaseExpiresAt = fromMicros(started), fromMicros(expires)
		out = append(out, &in)
	}
	return out, translate(rows.Err())
}

// InstanceTakeOver takes instance dead over for by (store.HeartbeatStore.InstanceTakeOver).
func (s *Store) InstanceTakeOver(ctx context.Context, dead *store.Instance, by string) (runs []*store.ManagedRun, ok bool, err error) {
	if dead.ID == by {
		return nil, false, clasp.InvalidField("instance", "An instance cannot take itself over.")
	}
	err = s.write(ctx, func(tx *wtx) error {
		runs, ok = nil, false
		res, err := tx.rexec(ctx, `DELETE FROM instances WHERE id = ? AND lease_expires_at = ?`, dead.ID, micros(dead.LeaseExpiresAt))
		if err != nil {
			return fmt.Errorf("take over instance %s: %w", dead.ID, err)
		}
		if n, _ := res.RowsAffected(); n == 0 {
			return nil
		}
		ok = true
		rows, err := tx.rquery(ctx, `SELECT `+hbManagedCols+` FROM runs WHERE host_id = ? AND managed = 1 AND pid IS NOT NULL
			ORDER BY created_at, id`, dead.ID)
		if err != nil {
			return fmt.Errorf("list runs of instance %s: %w", dead.ID, err)
		}
		if runs, err = scanAll(rows, scanManaged); err != nil {
			return err
		}
		if _, err := tx.rexec(ctx, `UPDATE runs SET host_id = ? WHERE host_id = ? AND status = 'running' AND managed = 1`,
			by, dead.ID); err != nil {
			return fmt.Errorf("move runs of instance %s: %w", dead.ID, err)
		}
		return nil
	})
	if err != nil {
		return nil, false, err
	}
	return runs, ok, nil
}
