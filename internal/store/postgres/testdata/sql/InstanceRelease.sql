-- $1 = @id
UPDATE instances SET lease_expires_at = least(lease_expires_at, now()) WHERE id = $1::text
