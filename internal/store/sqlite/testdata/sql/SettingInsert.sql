-- The first value of a key wins; a later one changes nothing.
INSERT INTO settings (key, value) VALUES (:key, :value) ON CONFLICT (key) DO NOTHING
