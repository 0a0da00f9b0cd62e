-- $1 = @status
-- $2 = @assignee
-- $3 = @checkout
-- $4 = @execution
-- $5 = @id
UPDATE issues SET status = $1::text, assignee_agent_id = $2::text, checkout_run_id = $3::text,
	execution_run_id = $4::text,
	execution_agent_name_key = CASE WHEN $4::text IS NULL THEN NULL
		ELSE (SELECT a.name_key FROM runs r JOIN agents a ON a.id = r.agent_id WHERE r.id = $4::text) END,
	execution_locked_at = CASE WHEN $4::text IS NULL THEN NULL ELSE now() END
WHERE id = $5::text
