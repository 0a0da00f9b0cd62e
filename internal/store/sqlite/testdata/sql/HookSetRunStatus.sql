UPDATE runs SET status = :status, finished_at = coalesce(:finished, finished_at) WHERE id = :run
