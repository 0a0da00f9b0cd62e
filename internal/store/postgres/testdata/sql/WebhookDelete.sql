-- $1 = @id
DELETE FROM webhooks WHERE id = $1::text
