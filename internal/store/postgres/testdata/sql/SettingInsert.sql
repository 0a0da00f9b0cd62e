-- $1 = @key
-- $2 = @value
INSERT INTO settings (key, value) VALUES ($1::text, $2::text) ON CONFLICT (key) DO UPDATE SET value = settings.value
RETURNING value
