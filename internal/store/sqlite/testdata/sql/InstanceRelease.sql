UPDATE instances SET lease_expires_at = min(lease_expires_at, :now) WHERE id = :id
