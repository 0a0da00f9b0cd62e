-- $1 = @agent
SELECT pg_advisory_xact_lock(hashtextextended('clasp.agent:' || $1::text, 0))
