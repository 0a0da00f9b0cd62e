package postgres

// Server instances (store.HeartbeatStore.Instance*): each `clasp serve`
// process that runs managed agents holds a row with a lease; runs.host_id
// names the instance that owns the run's process.

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/clasp-dev/clasp"
	"github.com/clasp-dev/clasp/internal/store"
)

// InstanceRegister records (or replaces) instance in with a lease of ttl.
func (s *Store) InstanceRegister(ctx context.Context, in *store.Instance, ttl time.Duration) error {
	_, err := s.pool.Exec(ctx, `INSERT INTO instances (id, host, pid, proc_start, started_at, lease_expires_at)
		VALUES ($1, $2, $3, $4, now(), now() + $5::bigint * interval '1 microsecond')
		ON CONFLICT (id) DO UPDATE SET host = excluded.host, pid = excluded.pid, proc_start = excluded.proc_start,
			started_at = excluded.started_at, lease_expires_at = excluded.lease_expires_at`,
		in.ID, in.Host, in.PID, in.ProcStart, ttl.Microseconds())
	if err != nil {
		return translate(fmt.Errorf("register instance %s: %w", in.ID, err))
	}
	return nil
}

// InstanceRenew extends instance id's lease to ttl from now; 404 not_found when it is gone.
func (s *Store) InstanceRenew(ctx context.Context, id string, ttl time.Duration) error {
	tag, err := s.pool.Exec(ctx, `UPDATE instances SET lease_expires_at = now() + $1::bigint * interval '1 microsecond'
		WHERE id = $2`, ttl.Microseconds(), id)
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
	_, err := s.pool.Exec(ctx, `UPDATE instances SET lease_expires_at = least(lease_expires_at, now()) WHERE id = $1`, id)
	if err != nil {
		return translate(fmt.Errorf("release instance %s: %w", id, err))
	}
	return nil
}

// InstanceList lists the instances of host.
func (s *Store) InstanceList(ctx context.Context, host string) ([]*store.Instance, error) {
	rows, err := s.pool.Query(ctx, `SELECT id, host, pid, proc_start, started_at, lease_expires_at, lease_expires_at <= now()
		FROM instances WHERE host = $1 ORDER BY started_at, id`, host)
	if err != nil {
		return nil, translate(fmt.Errorf("list instances of %s: %w", host, err))
	}
	defer rows.Close()
	var out []*store.Instance
	for rows.Next() {
		var in store.Instance
		if err := rows.Scan(&in.ID, &in.Host, &in.PID, &in.ProcStart, &in.StartedAt, &in.LeaseExpiresAt, &in.Expired); err != nil {
			return nil, translate(fmt.Errorf("list instances of %s: %w", host, err))
		}
		out = append(out, &in)
	}
	return out, translate(rows.Err())
}

// InstanceTakeOver takes instance dead over for by (store.HeartbeatStore.InstanceTakeOver).
func (s *Store) InstanceTakeOver(ctx context.Context, dead *store.Instance, by string) (runs []*store.ManagedRun, ok bool, err error) {
	if dead.ID == by {
		return nil, false, clasp.InvalidField("instance", "An instance cannot take itself over.")
	}
	err = s.tx(ctx, func(tx pgx.Tx) error {
		runs, ok = nil, false
		tag, err := tx.Exec(ctx, `DELETE FROM instances WHERE id = $1 AND lease_expires_at = $2`, dead.ID, dead.LeaseExpiresAt)
		if err != nil {
			return fmt.Errorf("take over instance %s: %w", dead.ID, err)
		}
		if tag.RowsAffected() == 0 {
			return nil
		}
		ok = true
		rows, err := tx.Query(ctx, `SELECT `+hbManagedCols+` FROM runs WHERE host_id = $1 AND managed AND pid IS NOT NULL
			ORDER BY created_at, id`, dead.ID)
		if err != nil {
			return fmt.Errorf("list runs of instance %s: %w", dead.ID, err)
		}
		if runs, err = scanAll(rows, scanManaged); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `UPDATE runs SET host_id = $1 WHERE host_id = $2 AND status = 'running' AND managed`,
			by, dead.ID); err != nil {
			return fmt.Errorf("move runs of instance %s: %w", dead.ID, err)
		}
		return nil
	})
	if err != nil {
		return nil, false, translate(err)
	}
	return runs, ok, nil
}
