SELECT status FROM agents WHERE id = ? AND company_id = ?
