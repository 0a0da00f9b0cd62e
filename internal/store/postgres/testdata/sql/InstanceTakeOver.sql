-- $1 = @id
-- $2 = @lease
DELETE FROM instances WHERE id = $1::text AND lease_expires_at = $2::timestamptz
