-- $1 = @window
DELETE FROM idempotency_keys WHERE created_at <= now() - $1::bigint * interval '1 microsecond'
