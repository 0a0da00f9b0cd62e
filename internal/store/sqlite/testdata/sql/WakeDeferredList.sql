SELECT id, company_id, agent_id, coalesce(issue_id, ''), reason, blocked_by_run_id FROM wake_requests
WHERE status = 'deferred' AND blocked_by_run_id IN (SELECT value FROM json_each(:runs))
ORDER BY created_at, id
