UPDATE runs SET status = :status, finished_at = CASE WHEN :terminal THEN :now ELSE finished_at END WHERE id = :run
