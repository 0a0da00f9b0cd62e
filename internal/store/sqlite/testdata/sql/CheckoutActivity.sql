INSERT INTO activity
	(company_id, actor_type, actor_id, run_id, action, entity_type, entity_id, details, created_at, request_id)
SELECT company_id, :actor_type, :actor_id, :actor_run, action, 'issue', id, details, :now, :actor_request FROM (
	-- L3: a dead holder displaced
	SELECT 1 AS ord, i.id, i.company_id, 'issue.checkout_lock_adopted' AS action,
		json_object('previousCheckoutRunId', :old_checkout, 'previousExecutionRunId', :old_execution,
			'why', coalesce(CASE WHEN :old_checkout IS NOT NULL AND :old_checkout <> :run THEN :checkout_state ELSE :execution_state END, '')) AS details
	FROM issues i WHERE i.id = :id
		AND ((:old_checkout IS NOT NULL AND :old_checkout <> :run) OR (:old_execution IS NOT NULL AND :old_execution <> :run))
	UNION ALL
	-- L1: the checkout, under its new epoch
	SELECT 2, i.id, i.company_id, 'issue.checked_out',
		json_object('agentId', :agent, 'runId', :run, 'checkoutEpoch', i.checkout_epoch)
	FROM issues i WHERE i.id = :id)
ORDER BY ord
