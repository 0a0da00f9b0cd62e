UPDATE runs SET lease_expires_at = :lease WHERE id = :run
