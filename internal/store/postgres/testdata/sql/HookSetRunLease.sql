-- $1 = @run
UPDATE runs SET lease_expires_at = now() - interval '1 second' WHERE id = $1::text
