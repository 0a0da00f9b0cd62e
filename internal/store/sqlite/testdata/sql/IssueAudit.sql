SELECT title, description, status, priority, assignee_agent_id FROM issues
	WHERE (id = ? OR identifier = ?) AND (? = '' OR company_id = ?)
