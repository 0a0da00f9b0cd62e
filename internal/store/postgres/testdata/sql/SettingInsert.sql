-- $1 = @key
-- $2 = @value
-- Inserts unless the key exists, and answers the stored value either way
-- (the conflicting row is read after the insert waited for it, so a
-- concurrent first writer's value is seen).
INSERT INTO settings (key, value) VALUES ($1::text, $2::text) ON CONFLICT (key) DO UPDATE SET value = settings.value
RETURNING value
