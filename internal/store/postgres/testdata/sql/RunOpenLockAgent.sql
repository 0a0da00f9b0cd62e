-- $1 = @agent
SELECT 1 FROM agents WHERE id = $1::text FOR UPDATE
