UPDATE issues SET
	execution_run_id = :retry,
	execution_locked_at = :now,
	checkout_run_id = CASE WHEN checkout_run_id = :lost THEN NULL ELSE checkout_run_id END,
	updated_at = :now
WHERE id = :issue AND execution_run_id = :lost
RETURNING id, company_id
