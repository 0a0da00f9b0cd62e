-- $1 = @status
-- $2 = @run
-- $3 = @blocked_by
-- $4 = @id
UPDATE wake_requests SET status = $1::text, run_id = $2::text, blocked_by_run_id = $3::text, updated_at = now()
WHERE id = $4::text AND status = 'deferred'
