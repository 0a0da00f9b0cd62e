UPDATE runs SET lease_expires_at = :now + :ttl_us, last_sign_of_life_at = :now
WHERE id = :run AND host_id = :host AND status = 'running' AND lease_expires_at > :now
