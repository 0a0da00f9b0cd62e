-- $1 = @key
SELECT value FROM settings WHERE key = $1::text
