-- $1 = @id
-- $2 = @host
-- $3 = @pid
-- $4 = @proc_start
-- $5 = @ttl_us
INSERT INTO instances (id, host, pid, proc_start, started_at, lease_expires_at)
VALUES ($1::text, $2::text, $3::integer, $4::bigint, now(), now() + $5::bigint * interval '1 microsecond')
ON CONFLICT (id) DO UPDATE SET host = excluded.host, pid = excluded.pid, proc_start = excluded.proc_start,
	started_at = excluded.started_at, lease_expires_at = excluded.lease_expires_at
