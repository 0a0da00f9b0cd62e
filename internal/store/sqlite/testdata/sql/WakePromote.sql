UPDATE wake_requests SET status = :status, run_id = :run, blocked_by_run_id = :blocked_by, updated_at = :now
WHERE id = :id AND status = 'deferred'
