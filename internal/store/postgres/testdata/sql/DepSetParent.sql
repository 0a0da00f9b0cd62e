-- $1 = @parent
-- $2 = @issue
UPDATE issues SET parent_id = $1::text, updated_at = now()
WHERE id = $2::text AND parent_id IS DISTINCT FROM $1::text
