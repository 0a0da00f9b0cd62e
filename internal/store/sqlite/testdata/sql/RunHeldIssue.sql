SELECT id FROM issues WHERE execution_run_id = :lost
ORDER BY (id IS :issue) DESC, execution_locked_at DESC, id LIMIT 1
