-- The git gate (RULES.md, The git gate): gate tokens and the read of
-- stamps. @at is the server's clock, given by the caller.

-- name: GateTokenInsert
INSERT INTO gate_tokens (id, company_id, name, prefix, token_hash, created_at)
VALUES (@id::text, @company::text, @name::text, @prefix::text, @hash::text, @at::timestamptz)
RETURNING id, company_id, name, prefix, created_at, last_used_at, revoked_at

-- name: GateTokenByHash
SELECT id, company_id, name, prefix, created_at, last_used_at, revoked_at
FROM gate_tokens WHERE token_hash = @hash::text

-- name: GateTokenList
SELECT id, company_id, name, prefix, created_at, last_used_at, revoked_at
FROM gate_tokens WHERE company_id = @company::text ORDER BY created_at, id

-- name: GateTokenRevoke
-- Revokes an unrevoked token of @company; no row when it is revoked
-- already or missing.
UPDATE gate_tokens SET revoked_at = @at::timestamptz
WHERE id = @id::text AND company_id = @company::text AND revoked_at IS NULL
RETURNING id, company_id, name, prefix, created_at, last_used_at, revoked_at

-- name: GateTokenGet
SELECT id, company_id, name, prefix, created_at, last_used_at, revoked_at
FROM gate_tokens WHERE id = @id::text AND company_id = @company::text

-- name: GateTokenUsed
-- Records a token's use at most once a minute.
UPDATE gate_tokens SET last_used_at = @at::timestamptz
WHERE id = @id::text AND (last_used_at IS NULL OR last_used_at <= @at::timestamptz - interval '1 minute')

-- name: GateStamps
-- G1-G3: the issues of company @company named by the identifiers of the
-- JSON array @idents (one look-up by the unique identifier each), with
-- the state of the run holding each one (live by the database clock) and
-- that run's agent name: one statement for a whole range of commits.
SELECT i.identifier, i.status, i.checkout_epoch, i.completed_epoch, i.checkout_run_id,
	CASE WHEN r.id IS NULL THEN NULL
		WHEN {{run_live r}} THEN 1 ELSE 0 END,
	a.name
FROM jsonb_array_elements_text(@idents::jsonb) j(ident)
JOIN issues i ON i.identifier = j.ident AND i.company_id = @company::text
LEFT JOIN runs r ON r.id = i.checkout_run_id
LEFT JOIN agents a ON a.id = r.agent_id
