DELETE FROM webhooks WHERE id = :id
