-- finished_at changes only when :finished is set (a terminal status).
UPDATE runs SET status = :status, finished_at = coalesce(:finished, finished_at) WHERE id = :run
