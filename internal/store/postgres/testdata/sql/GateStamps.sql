-- $1 = @idents
-- $2 = @company
SELECT i.identifier, i.status, i.checkout_epoch, i.completed_epoch, i.checkout_run_id,
	CASE WHEN r.id IS NULL THEN NULL
		WHEN r.status = 'queued' OR (r.status = 'running' AND r.lease_expires_at > now()) THEN 1 ELSE 0 END,
	a.name
FROM jsonb_array_elements_text($1::jsonb) j(ident)
JOIN issues i ON i.identifier = j.ident AND i.company_id = $2::text
LEFT JOIN runs r ON r.id = i.checkout_run_id
LEFT JOIN agents a ON a.id = r.agent_id
