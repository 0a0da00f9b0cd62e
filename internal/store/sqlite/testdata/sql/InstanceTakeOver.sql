DELETE FROM instances WHERE id = :id AND lease_expires_at = :lease
