UPDATE runs SET
	status = 'failed',
	error_code = 'lease_expired',
	error = coalesce(error, 'lease expired: no sign of life before the lease ran out'),
	finished_at = :now
WHERE id IN (SELECT id FROM runs WHERE status = 'running' AND lease_expires_at <= :now
		ORDER BY lease_expires_at LIMIT :limit)
	AND status = 'running' AND lease_expires_at <= :now
RETURNING id, company_id, agent_id, lease_expires_at
