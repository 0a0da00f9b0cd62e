SELECT status FROM agents WHERE id = :id AND company_id = :company
