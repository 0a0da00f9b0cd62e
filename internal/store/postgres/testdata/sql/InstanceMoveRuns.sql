-- $1 = @by
-- $2 = @dead
UPDATE runs SET host_id = $1::text WHERE host_id = $2::text AND status = 'running' AND managed
