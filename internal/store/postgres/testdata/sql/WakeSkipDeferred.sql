-- $1 = @agent
UPDATE wake_requests SET status = 'skipped', updated_at = now() WHERE agent_id = $1::text AND status = 'deferred'
