SELECT i.id, i.identifier, i.status FROM issues i
WHERE (i.id = :rid OR i.identifier = :rident) AND i.company_id = :company
