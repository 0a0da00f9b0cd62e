UPDATE issues SET parent_id = :parent, updated_at = :now
WHERE id = :issue AND parent_id IS NOT :parent
