-- Fragments: expressions the statements share, each written once here and
-- used as {{name alias}} (internal/store/sqlfile says how a use expands).
-- now() is the transaction's start, the database's clock.
--
-- A run is live iff it exists and is queued, or running with a lease that
-- has not expired at the transaction's time; a running run whose lease
-- has expired is lost. A holder (a lock column naming a run) is dead when
-- its run is terminal, lost or missing (no row).

-- fragment: run_leased(r)
-- Run r is running with a lease that has not expired at now().
r.status = 'running' AND r.lease_expires_at > now()

-- fragment: run_live(r)
-- Run r is live: queued, or running with a lease that has not expired.
-- An OR: a use within an AND needs parentheses around it.
r.status = 'queued' OR ({{run_leased r}})

-- fragment: run_state(r)
-- The state of run r, a row that exists: 'live', 'lost' (running, its
-- lease expired) or 'terminal'. A look-up of a run by id wraps it in
-- coalesce((SELECT ...), 'missing') for a run that does not exist.
CASE
	WHEN {{run_live r}} THEN 'live'
	WHEN r.status = 'running' THEN 'lost' ELSE 'terminal' END
