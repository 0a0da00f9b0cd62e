SELECT id FROM issues
WHERE (id = :rid OR identifier = :rident) AND (:company = '' OR company_id = :company)
