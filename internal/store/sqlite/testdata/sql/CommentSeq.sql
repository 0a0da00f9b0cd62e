SELECT seq FROM comments WHERE id = ? AND issue_id = ?
