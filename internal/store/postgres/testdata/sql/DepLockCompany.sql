-- $1 = @company
SELECT pg_advisory_xact_lock(hashtextextended('clasp.deps:' || $1::text, 0))
