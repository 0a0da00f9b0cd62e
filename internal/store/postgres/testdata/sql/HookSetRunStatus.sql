-- $1 = @status
-- $2 = @terminal
-- $3 = @run
UPDATE runs SET status = $1::text, finished_at = CASE WHEN $2::boolean THEN now() ELSE finished_at END
WHERE id = $3::text
