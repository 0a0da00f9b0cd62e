-- clasp schema v21: webhook subscriptions and their transactional outbox
-- (RULES.md, Webhooks). A subscription (webhooks) of a company names a
-- URL, the activity actions it wants (a JSON array of patterns: an exact
-- action such as issue.escalated, a prefix such as issue.*, or * for all)
-- and the secret its deliveries are signed with (kept as it is: the
-- server needs it to sign). The trigger activity_webhook_outbox writes one
-- webhook_deliveries row per enabled subscription of the row's company
-- whose patterns match its action, in the transaction that writes the
-- activity row, whatever statement writes it: a change that rolls back
-- leaves no delivery, and a committed change has its deliveries committed
-- with it (W1). The dispatcher sends them (W2-W5). Times are unix
-- microseconds. The PostgreSQL schema v19 does the same.

-- +goose Up
CREATE TABLE webhooks (
    id            TEXT PRIMARY KEY,
    company_id    TEXT NOT NULL REFERENCES companies(id),
    url           TEXT NOT NULL,
    events        TEXT NOT NULL,
    secret        TEXT NOT NULL,
    format        TEXT NOT NULL DEFAULT 'json' CHECK (format = 'json' OR format = 'slack'),
    enabled       INTEGER NOT NULL DEFAULT 1,
    failing_since INTEGER,
    created_at    INTEGER NOT NULL,
    updated_at    INTEGER NOT NULL
) STRICT;
CREATE INDEX webhooks_company ON webhooks(company_id) WHERE enabled = 1;

-- seq orders the deliveries of one subscription and entity (W3); id is
-- the delivery's public id (a random UUID), the receiver's Clasp-Delivery
-- header, the same at every attempt.
CREATE TABLE webhook_deliveries (
    seq             INTEGER PRIMARY KEY,
    id              TEXT NOT NULL UNIQUE,
    webhook_id      TEXT NOT NULL REFERENCES webhooks(id) ON DELETE CASCADE,
    company_id      TEXT NOT NULL,
    activity_id     INTEGER NOT NULL,
    action          TEXT NOT NULL,
    order_key       TEXT NOT NULL,
    status          TEXT NOT NULL DEFAULT 'pending' CHECK (status = 'pending' OR status = 'delivered' OR status = 'failed'),
    attempts        INTEGER NOT NULL DEFAULT 0,
    next_attempt_at INTEGER NOT NULL,
    retry_from      INTEGER NOT NULL,
    claimed_until   INTEGER,
    claim           TEXT,
    last_status     INTEGER,
    last_body       TEXT,
    last_error      TEXT,
    latency_ms      INTEGER,
    created_at      INTEGER NOT NULL,
    delivered_at    INTEGER
) STRICT;
CREATE INDEX webhook_deliveries_pending ON webhook_deliveries(seq) WHERE status = 'pending';
CREATE INDEX webhook_deliveries_chain ON webhook_deliveries(webhook_id, order_key, seq) WHERE status = 'pending';
CREATE INDEX webhook_deliveries_log ON webhook_deliveries(webhook_id, seq DESC);

-- +goose StatementBegin
-- W1: the outbox. A pattern matches an action when it equals it, when it
-- is *, or when it ends in .* and the action starts with what precedes
-- the *. The delivery's id is a random (version 4) UUID.
CREATE TRIGGER activity_webhook_outbox AFTER INSERT ON activity
BEGIN
    INSERT INTO webhook_deliveries (id, webhook_id, company_id, activity_id, action, order_key,
        next_attempt_at, retry_from, created_at)
    SELECT lower(hex(randomblob(4)) || '-' || hex(randomblob(2)) || '-4' || substr(hex(randomblob(2)), 2) || '-'
            || substr('89ab', 1 + (abs(random()) % 4), 1) || substr(hex(randomblob(2)), 2) || '-' || hex(randomblob(6))),
        w.id, NEW.company_id, NEW.id, NEW.action, NEW.entity_id,
        NEW.created_at, NEW.created_at, NEW.created_at
    FROM webhooks w
    WHERE w.company_id = NEW.company_id AND w.enabled = 1
      AND EXISTS (SELECT 1 FROM json_each(w.events) p
                  WHERE p.value = NEW.action OR p.value = '*'
                     OR (substr(p.value, -2) = '.*' AND substr(NEW.action, 1, length(p.value) - 1) = substr(p.value, 1, length(p.value) - 1)))
    ORDER BY w.id;
END;
-- +goose StatementEnd

-- +goose StatementBegin
-- W2: a subscription is failing from its first delivery given up until a
-- delivery succeeds.
CREATE TRIGGER webhook_deliveries_outcome AFTER UPDATE OF status ON webhook_deliveries
WHEN OLD.status IS NOT NEW.status AND NEW.status <> 'pending'
BEGIN
    UPDATE webhooks SET failing_since = CAST((julianday('now') - 2440587.5) * 86400000000 AS INTEGER)
    WHERE id = NEW.webhook_id AND failing_since IS NULL AND NEW.status = 'failed';
    UPDATE webhooks SET failing_since = NULL
    WHERE id = NEW.webhook_id AND failing_since IS NOT NULL AND NEW.status = 'delivered';
END;
-- +goose StatementEnd
