UPDATE instances SET lease_expires_at = :now + :ttl WHERE id = :id
