INSERT INTO activity
	(company_id, actor_type, actor_id, run_id, action, entity_type, entity_id, details, created_at, request_id)
SELECT i.company_id, :actor_type, :actor_id, :actor_run, 'issue.stale_lock_cleared', 'issue', i.id,
	json_object('clearedCheckoutRunId', :old_checkout, 'clearedExecutionRunId', :old_execution,
		'why', coalesce(CASE WHEN :old_checkout IS NOT NULL THEN :checkout_state ELSE :execution_state END, '')),
	:now, :actor_request
FROM issues i WHERE i.id = :id
