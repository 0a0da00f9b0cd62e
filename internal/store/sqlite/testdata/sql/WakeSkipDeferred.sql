UPDATE wake_requests SET status = 'skipped', updated_at = :now WHERE agent_id = :agent AND status = 'deferred'
