SELECT coalesce(max(id), 0) FROM activity WHERE company_id = :company
