-- The git gate (RULES.md, The git gate): gate tokens and the read of
-- stamps. Times are unix microseconds; :at is the server's clock, given by
-- the caller; :now is the store clock.

-- name: GateTokenInsert
INSERT INTO gate_tokens (id, company_id, name, prefix, token_hash, created_at)
VALUES (:id, :company, :name, :prefix, :hash, :at)
RETURNING id, company_id, name, prefix, created_at, last_used_at, revoked_at

-- name: GateTokenByHash
SELECT id, company_id, name, prefix, created_at, last_used_at, revoked_at
FROM gate_tokens WHERE token_hash = :hash

-- name: GateTokenList
SELECT id, company_id, name, prefix, created_at, last_used_at, revoked_at
FROM gate_tokens WHERE company_id = :company ORDER BY created_at, id

-- name: GateTokenRevoke
-- Revokes an unrevoked token of :company; no row when it is revoked
-- already or missing.
UPDATE gate_tokens SET revoked_at = :at WHERE id = :id AND company_id = :company AND revoked_at IS NULL
RETURNING id, company_id, name, prefix, created_at, last_used_at, revoked_at

-- name: GateTokenGet
SELECT id, company_id, name, prefix, created_at, last_used_at, revoked_at
FROM gate_tokens WHERE id = :id AND company_id = :company

-- name: GateTokenUsed
-- Records a token's use at most once a minute.
UPDATE gate_tokens SET last_used_at = :at
WHERE id = :id AND (last_used_at IS NULL OR last_used_at <= :at - 60000000)

-- name: GateStamps
-- G1-G3: the issues of company :company named by the identifiers of the
-- JSON array :idents (one look-up by the unique identifier each), with
-- the state of the run holding each one (live by the store clock) and
-- that run's agent name: one statement for a whole range of commits.
SELECT i.identifier, i.status, i.checkout_epoch, i.completed_epoch, i.checkout_run_id,
	CASE WHEN r.id IS NULL THEN NULL
		WHEN {{run_live r}} THEN 1 ELSE 0 END,
	a.name
FROM json_each(:idents) j
JOIN issues i ON i.identifier = j.value AND i.company_id = :company
LEFT JOIN runs r ON r.id = i.checkout_run_id
LEFT JOIN agents a ON a.id = r.agent_id
