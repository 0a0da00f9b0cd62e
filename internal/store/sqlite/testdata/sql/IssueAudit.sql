SELECT title, description, status, priority, assignee_agent_id FROM issues
WHERE (id = :rid OR identifier = :rident) AND (:company = '' OR company_id = :company)
