UPDATE runs SET lease_expires_at = :now - 1000000 WHERE id = :run
