-- $1 = @host
SELECT id, host, pid, proc_start, started_at, lease_expires_at, lease_expires_at <= now()
FROM instances WHERE host = $1::text ORDER BY started_at, id
