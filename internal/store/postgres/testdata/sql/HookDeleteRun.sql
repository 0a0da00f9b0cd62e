-- $1 = @run
DELETE FROM runs WHERE id = $1::text
