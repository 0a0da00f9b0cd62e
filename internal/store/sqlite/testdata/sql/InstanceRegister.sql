INSERT INTO instances (id, host, pid, proc_start, started_at, lease_expires_at)
VALUES (:id, :host, :pid, :proc_start, :now, :now + :ttl_us)
ON CONFLICT (id) DO UPDATE SET host = excluded.host, pid = excluded.pid, proc_start = excluded.proc_start,
	started_at = excluded.started_at, lease_expires_at = excluded.lease_expires_at
