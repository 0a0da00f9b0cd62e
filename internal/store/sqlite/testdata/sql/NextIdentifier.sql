UPDATE companies SET issue_counter = issue_counter + 1 WHERE id = :company
