-- $1 = @ttl_us
-- $2 = @run
-- $3 = @host
UPDATE runs SET lease_expires_at = now() + $1::bigint * interval '1 microsecond', last_sign_of_life_at = now()
WHERE id = $2::text AND host_id = $3::text AND status = 'running' AND lease_expires_at > now()
