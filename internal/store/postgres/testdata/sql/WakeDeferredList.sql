-- $1 = @runs
SELECT id, company_id, agent_id, coalesce(issue_id, ''), reason, blocked_by_run_id FROM wake_requests
WHERE status = 'deferred' AND blocked_by_run_id = ANY($1::text[])
ORDER BY created_at, id FOR UPDATE
