UPDATE instances SET lease_expires_at = :now + :ttl_us WHERE id = :id
