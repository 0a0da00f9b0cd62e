SELECT seq FROM comments WHERE id = :id AND issue_id = :issue
