SELECT i.identifier, i.status, i.checkout_epoch, i.completed_epoch, i.checkout_run_id,
	CASE WHEN r.id IS NULL THEN NULL
		WHEN r.status = 'queued' OR (r.status = 'running' AND r.lease_expires_at > :now) THEN 1 ELSE 0 END,
	a.name
FROM json_each(:idents) j
JOIN issues i ON i.identifier = j.value AND i.company_id = :company
LEFT JOIN runs r ON r.id = i.checkout_run_id
LEFT JOIN agents a ON a.id = r.agent_id
