-- clasp schema v19 for PostgreSQL: webhook subscriptions and their
-- transactional outbox (RULES.md, Webhooks). A subscription (webhooks)
-- of a company names a URL, the activity actions it wants (a JSON array of
-- patterns: an exact action such as issue.escalated, a prefix such as
-- issue.*, or * for all) and the secret its deliveries are signed with
-- (kept as it is: the server needs it to sign). The trigger
-- activity_webhook_outbox writes one webhook_deliveries row per enabled
-- subscription of the row's company whose patterns match its action, in
-- the transaction that writes the activity row, whatever statement writes
-- it: a change that rolls back leaves no delivery, and a committed change
-- has its deliveries committed with it (W1). The dispatcher sends them
-- (W2-W5). As the SQLite schema v21.

-- +goose Up
CREATE TABLE webhooks (
    id            text COLLATE "C" PRIMARY KEY,
    company_id    text COLLATE "C" NOT NULL REFERENCES companies(id),
    url           text NOT NULL,
    events        jsonb NOT NULL,
    secret        text NOT NULL,
    format        text NOT NULL DEFAULT 'json' CHECK (format = 'json' OR format = 'slack'),
    enabled       boolean NOT NULL DEFAULT true,
    failing_since timestamptz,
    created_at    timestamptz NOT NULL,
    updated_at    timestamptz NOT NULL
);
CREATE INDEX webhooks_company ON webhooks(company_id) WHERE enabled;

-- seq orders the deliveries of one subscription and entity (W3); id is
-- the delivery's public id, the receiver's Clasp-Delivery header, the
-- same at every attempt.
CREATE TABLE webhook_deliveries (
    seq             bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    id              text COLLATE "C" NOT NULL UNIQUE DEFAULT gen_random_uuid()::text,
    webhook_id      text COLLATE "C" NOT NULL REFERENCES webhooks(id) ON DELETE CASCADE,
    company_id      text COLLATE "C" NOT NULL,
    activity_id     bigint NOT NULL,
    action          text COLLATE "C" NOT NULL,
    order_key       text COLLATE "C" NOT NULL,
    status          text NOT NULL DEFAULT 'pending' CHECK (status = 'pending' OR status = 'delivered' OR status = 'failed'),
    attempts        integer NOT NULL DEFAULT 0,
    next_attempt_at timestamptz NOT NULL DEFAULT now(),
    retry_from      timestamptz NOT NULL DEFAULT now(),
    claimed_until   timestamptz,
    claim           text COLLATE "C",
    last_status     integer,
    last_body       text,
    last_error      text,
    latency_ms      integer,
    created_at      timestamptz NOT NULL DEFAULT now(),
    delivered_at    timestamptz
);
-- The dispatcher's pick: due pending deliveries, oldest first, and the
-- head of each (subscription, entity) chain.
CREATE INDEX webhook_deliveries_pending ON webhook_deliveries(seq) WHERE status = 'pending';
CREATE INDEX webhook_deliveries_chain ON webhook_deliveries(webhook_id, order_key, seq) WHERE status = 'pending';
CREATE INDEX webhook_deliveries_log ON webhook_deliveries(webhook_id, seq DESC);

-- +goose StatementBegin
-- W1: the outbox. A pattern matches an action when it equals it, when it
-- is *, or when it ends in .* and the action starts with what precedes
-- the *.
CREATE FUNCTION activity_webhook_outbox() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO webhook_deliveries (webhook_id, company_id, activity_id, action, order_key)
    SELECT w.id, NEW.company_id, NEW.id, NEW.action, NEW.entity_id
    FROM webhooks w
    WHERE w.company_id = NEW.company_id AND w.enabled
      AND EXISTS (SELECT 1 FROM jsonb_array_elements_text(w.events) p(pat)
                  WHERE p.pat = NEW.action OR p.pat = '*'
                     OR (right(p.pat, 2) = '.*' AND starts_with(NEW.action, left(p.pat, -1))))
    ORDER BY w.id;
    RETURN NULL;
END;
$$;
-- +goose StatementEnd

CREATE TRIGGER activity_webhook_outbox AFTER INSERT ON activity
FOR EACH ROW EXECUTE FUNCTION activity_webhook_outbox();

-- +goose StatementBegin
-- W2: a subscription is failing from its first delivery given up until a
-- delivery succeeds.
CREATE FUNCTION webhook_deliveries_outcome() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF NEW.status = 'failed' THEN
        UPDATE webhooks SET failing_since = now() WHERE id = NEW.webhook_id AND failing_since IS NULL;
    ELSE
        UPDATE webhooks SET failing_since = NULL WHERE id = NEW.webhook_id AND failing_since IS NOT NULL;
    END IF;
    RETURN NULL;
END;
$$;
-- +goose StatementEnd

CREATE TRIGGER webhook_deliveries_outcome AFTER UPDATE OF status ON webhook_deliveries
FOR EACH ROW WHEN (OLD.status IS DISTINCT FROM NEW.status AND NEW.status <> 'pending')
EXECUTE FUNCTION webhook_deliveries_outcome();
