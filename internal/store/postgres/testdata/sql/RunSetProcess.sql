-- $1 = @pid
-- $2 = @proc_start
-- $3 = @run
-- $4 = @host
UPDATE runs SET pid = $1::integer, proc_start = $2::bigint
WHERE id = $3::text AND host_id = $4::text AND status = 'running'
