package postgres

// SQL pieces of the statements still written in Go (agent.go, run.go,
// heartbeat.go, instance.go). The statements of sql/*.sql are whole and
// use none of these.

import "strings"

// runState is the SQL state of run alias r: 'live', 'lost' or 'terminal'.
func runState(r string) string {
	return `CASE WHEN ` + r + `.status = 'queued' OR (` + r + `.status = 'running' AND ` + r + `.lease_expires_at > now()) THEN 'live'
		WHEN ` + r + `.status = 'running' THEN 'lost' ELSE 'terminal' END`
}

// sqlLive is the SQL condition "run alias r is live".
func sqlLive(r string) string {
	return `(` + r + `.status = 'queued' OR (` + r + `.status = 'running' AND ` + r + `.lease_expires_at > now()))`
}

// sqlIssueRef selects issue alias i by @rid (UUID) or @rident
// (identifier) within @company (empty for any): one probe of the primary
// key, whose value is @rid or else the id the identifier's index gives
// (looked up only when @rid is empty), never a BitmapOr of both indexes.
const sqlIssueRef = `i.id = coalesce(nullif(@rid::text, ''), (SELECT ref.id FROM issues ref WHERE ref.identifier = @rident::text)) AND (@company::text = '' OR i.company_id = @company::text)`

// sqlActivityInto starts the INSERT of activity rows; a SELECT of
// (company_id, actor_type, actor_id, run_id, request_id, action,
// entity_type, entity_id, details) follows (sqlActorCols gives the four
// actor columns).
const sqlActivityInto = `INSERT INTO activity (company_id, actor_type, actor_id, run_id, request_id, action, entity_type, entity_id, details) `

// sqlActorCols are the actor columns of an activity row from actorArgs.
const sqlActorCols = `@actor_type::text, @actor_id::text, @actor_run::text, @actor_request::text`

// sqlIdempotencyRecordCTE is CTE rec of a creating statement: the record
// (@idem_actor, @idem_key) -> the resource @id of kind @idem_type, when
// @idem_key is set and the resource was created (made) in the same
// statement. A record in force that committed since the lookup (a
// concurrent duplicate) makes it fail on the primary key, and the whole
// statement, creation included, with it.
const sqlIdempotencyRecordCTE = `rec AS (
		INSERT INTO idempotency_keys (actor_id, key, request_hash, resource_type, resource_id, created_at)
		SELECT @idem_actor::text, @idem_key::text, @idem_hash::text, @idem_type::text, made.id, now()
		FROM made WHERE @idem_key::text IS NOT NULL
	)`

// qualify returns cols with "alias." before each column.
func qualify(alias, cols string) string {
	parts := strings.Split(cols, ",")
	for i, p := range parts {
		parts[i] = alias + "." + strings.TrimSpace(p)
	}
	return strings.Join(parts, ", ")
}
