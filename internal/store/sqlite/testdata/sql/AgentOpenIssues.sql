SELECT id, company_id, status, assignee_agent_id, checkout_run_id, execution_run_id FROM issues
WHERE assignee_agent_id = :agent AND status NOT IN ('done', 'cancelled')
ORDER BY id
