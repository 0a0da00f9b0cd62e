SELECT id, host, pid, proc_start, started_at, lease_expires_at, lease_expires_at <= :now
FROM instances WHERE host = :host ORDER BY started_at, id
