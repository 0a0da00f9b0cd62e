-- $1 = @issue
SELECT status, assignee_agent_id, checkout_run_id, execution_run_id, escalated_at IS NOT NULL FROM issues WHERE id = $1::text FOR UPDATE
