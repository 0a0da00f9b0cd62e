DELETE FROM runs WHERE id = :run
