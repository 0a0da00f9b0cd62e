SELECT parent_id FROM issues WHERE id = :issue
