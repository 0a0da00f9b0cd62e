-- $1 = @ttl_us
-- $2 = @id
UPDATE instances SET lease_expires_at = now() + $1::bigint * interval '1 microsecond' WHERE id = $2::text
