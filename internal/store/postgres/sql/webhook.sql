-- Webhooks (RULES.md, Webhooks): subscriptions, the delivery log and the
-- dispatcher's claim and outcomes. The deliveries themselves are written
-- by the trigger activity_webhook_outbox (schema v19, W1). now() is the
-- database's clock.

-- name: WebhookInsert
INSERT INTO webhooks (id, company_id, url, events, secret, format, enabled, created_at, updated_at)
VALUES (@id::text, @company::text, @url::text, @events::jsonb, @secret::text, @format::text, @enabled::boolean, now(), now())
RETURNING id, company_id, url, events::text, format, enabled, failing_since, created_at, updated_at

-- name: WebhookGet
SELECT id, company_id, url, events::text, format, enabled, failing_since, created_at, updated_at
FROM webhooks WHERE id = @id::text

-- name: WebhookList
SELECT id, company_id, url, events::text, format, enabled, failing_since, created_at, updated_at
FROM webhooks WHERE company_id = @company::text ORDER BY created_at, id

-- name: WebhookUpdate
-- Each field given (not NULL) replaces the stored one.
UPDATE webhooks SET
	url = coalesce(@url::text, url),
	events = coalesce(@events::jsonb, events),
	format = coalesce(@format::text, format),
	enabled = coalesce(@enabled::boolean, enabled),
	secret = coalesce(@secret::text, secret),
	updated_at = now()
WHERE id = @id::text
RETURNING id, company_id, url, events::text, format, enabled, failing_since, created_at, updated_at

-- name: WebhookDelete
-- The subscription and its deliveries (ON DELETE CASCADE).
DELETE FROM webhooks WHERE id = @id::text

-- name: WebhookDeliveryList
-- W4: a subscription's delivery log, newest first, a page of @limit rows
-- with seq below @before (0: from the newest).
SELECT id, webhook_id, company_id, activity_id, action, order_key, status, attempts,
	CASE WHEN status = 'pending' THEN next_attempt_at END, last_status, last_body, last_error, latency_ms,
	created_at, delivered_at, seq
FROM webhook_deliveries
WHERE webhook_id = @webhook::text AND (@before::bigint = 0 OR seq < @before::bigint)
ORDER BY seq DESC LIMIT @limit::int

-- name: WebhookDeliveryGet
SELECT id, webhook_id, company_id, activity_id, action, order_key, status, attempts,
	CASE WHEN status = 'pending' THEN next_attempt_at END, last_status, last_body, last_error, latency_ms,
	created_at, delivered_at, seq
FROM webhook_deliveries WHERE id = @id::text

-- name: WebhookRedeliver
-- W4: the delivery is sent again at once, with the same id, and retried
-- for another 24 h if it fails; a delivery being sent keeps its claim.
UPDATE webhook_deliveries SET status = 'pending', next_attempt_at = now(), retry_from = now(), delivered_at = NULL
WHERE id = @id::text
RETURNING id, webhook_id, company_id, activity_id, action, order_key, status, attempts,
	next_attempt_at, last_status, last_body, last_error, latency_ms, created_at, delivered_at, seq

-- name: WebhookClaim
-- W3: claims up to @limit due deliveries for @lease_us microseconds under
-- the claim token @claim, counting the attempt. A delivery is due when it
-- is pending, its next attempt's time has come, no claim on it is
-- current, and no earlier delivery of its subscription and entity is
-- pending (order per entity). FOR UPDATE SKIP LOCKED: a delivery another
-- replica is claiming at this moment is left to it, and the WHERE is
-- checked again on the newest version of each row locked, so a claim
-- committed meanwhile excludes it.
WITH due AS (
	SELECT d.seq FROM webhook_deliveries d
	WHERE d.status = 'pending' AND d.next_attempt_at <= now()
		AND (d.claimed_until IS NULL OR d.claimed_until <= now())
		AND NOT EXISTS (SELECT 1 FROM webhook_deliveries e
			WHERE e.webhook_id = d.webhook_id AND e.order_key = d.order_key AND e.status = 'pending' AND e.seq < d.seq)
	ORDER BY d.seq
	LIMIT @limit::int
	FOR UPDATE OF d SKIP LOCKED
)
UPDATE webhook_deliveries d SET claimed_until = now() + @lease_us::bigint * interval '1 microsecond',
	claim = @claim::text, attempts = d.attempts + 1
FROM due WHERE d.seq = due.seq

-- name: WebhookClaimed
-- The deliveries claimed under @claim, with their subscription and the
-- activity row each carries, in order.
SELECT d.seq, d.id, d.webhook_id, d.attempts, d.retry_from, w.url, w.secret, w.format,
	a.id, a.company_id, a.actor_type, a.actor_id, a.run_id, a.action, a.entity_type, a.entity_id, a.details, a.created_at, a.request_id
FROM webhook_deliveries d
JOIN webhooks w ON w.id = d.webhook_id
JOIN activity a ON a.id = d.activity_id
WHERE d.claim = @claim::text AND d.status = 'pending'
ORDER BY d.seq

-- name: WebhookDelivered
-- W2: a 2xx answered the attempt made under @claim. The subscription is
-- no longer failing (trigger webhook_deliveries_outcome).
UPDATE webhook_deliveries SET status = 'delivered', delivered_at = now(), claimed_until = NULL, claim = NULL,
	last_status = @status::int, last_body = @body::text, last_error = NULL, latency_ms = @latency::int
WHERE seq = @seq::bigint AND claim = @claim::text

-- name: WebhookRetry
-- W2: the attempt made under @claim failed; it is tried again in
-- @delay_us microseconds, unless that is later than @max_age_us after
-- the delivery's retry window opened (no row: give up).
UPDATE webhook_deliveries SET next_attempt_at = now() + @delay_us::bigint * interval '1 microsecond',
	claimed_until = NULL, claim = NULL,
	last_status = @status::int, last_body = @body::text, last_error = @error::text, latency_ms = @latency::int
WHERE seq = @seq::bigint AND claim = @claim::text
	AND now() + @delay_us::bigint * interval '1 microsecond' <= retry_from + @max_age_us::bigint * interval '1 microsecond'

-- name: WebhookGiveUp
-- W2: the attempt made under @claim failed and the retry window is over:
-- the delivery failed, and its subscription is failing (trigger
-- webhook_deliveries_outcome).
UPDATE webhook_deliveries SET status = 'failed', claimed_until = NULL, claim = NULL,
	last_status = @status::int, last_body = @body::text, last_error = @error::text, latency_ms = @latency::int
WHERE seq = @seq::bigint AND claim = @claim::text

-- name: WebhookNextDue
-- W3: in how many microseconds (0 or less: now) the next delivery that
-- could be claimed is due, by the same conditions as WebhookClaim; NULL
-- when there is none. A read: the dispatcher asks it before it claims.
SELECT (extract(epoch FROM min(greatest(d.next_attempt_at, coalesce(d.claimed_until, d.next_attempt_at))) - now()) * 1000000)::bigint
FROM webhook_deliveries d
WHERE d.status = 'pending'
	AND NOT EXISTS (SELECT 1 FROM webhook_deliveries e
		WHERE e.webhook_id = d.webhook_id AND e.order_key = d.order_key AND e.status = 'pending' AND e.seq < d.seq)

-- name: WebhookAnyEnabled
-- W1: whether any subscription is enabled; with none, the outbox trigger
-- writes no delivery.
SELECT EXISTS (SELECT 1 FROM webhooks WHERE enabled)

-- name: AttentionList
-- E5: the issues of @company that need a person, escalated ones first
-- (newest escalation first), then abandoned ones: in_progress with no
-- live run holding either lock (newest change first). At most @limit.
SELECT i.id, i.identifier, i.title, i.status, i.assignee_agent_id,
	CASE WHEN i.escalated_at IS NOT NULL THEN 'escalated' ELSE 'abandoned' END,
	coalesce(i.escalated_at, i.updated_at), i.run_failures, i.run_failure_log
FROM issues i
WHERE i.company_id = @company::text
	AND (i.escalated_at IS NOT NULL
		OR (i.status = 'in_progress'
			AND NOT EXISTS (SELECT 1 FROM runs r WHERE (r.id = i.checkout_run_id OR r.id = i.execution_run_id)
				AND ({{run_live r}}))))
ORDER BY i.escalated_at IS NULL, coalesce(i.escalated_at, i.updated_at) DESC, i.id
LIMIT @limit::int
