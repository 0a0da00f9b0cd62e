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
--
-- Escalation (RULES.md, Escalation, E1-E4): a company escalates an issue
-- whose runs ended failed or timed out escalate_after_failures times in a
-- row (0: never). The issue counts them (run_failures, with a line per
-- failure in run_failure_log); the trigger runs_escalation keeps the count
-- in the transaction that ends each run, whatever statement ends it (a
-- finish, the sweeper's lease expiry, a lost process), and at the N-th it
-- moves the issue to blocked with its locks cleared, cancels the runs still
-- queued for it, and writes one comment and one issue.escalated row, all in
-- that transaction. escalated_at marks it until it leaves blocked.

-- +goose Up
ALTER TABLE companies ADD COLUMN escalate_after_failures integer NOT NULL DEFAULT 3
    CHECK (escalate_after_failures >= 0 AND escalate_after_failures <= 100);
ALTER TABLE issues ADD COLUMN run_failures integer NOT NULL DEFAULT 0;
ALTER TABLE issues ADD COLUMN run_failure_log text;
ALTER TABLE issues ADD COLUMN escalated_at timestamptz;
CREATE INDEX issues_escalated ON issues(company_id, escalated_at DESC) WHERE escalated_at IS NOT NULL;
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

-- +goose StatementBegin
-- E1, E2: a run of an issue (its issue_id, else the issues it locks) that
-- ends failed or timed_out counts one failure of each such issue that is
-- open and not escalated; one that succeeds resets the count. At the
-- company's escalate_after_failures-th failure in a row the issue is
-- escalated in this transaction. VOLATILE: each statement sees the firing
-- statement's changes (a retry it queued, locks it moved).
CREATE FUNCTION runs_escalation() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    iss record;
    lim integer;
    n integer;
    cid text;
    body text;
BEGIN
    IF NEW.status = 'succeeded' THEN
        UPDATE issues SET run_failures = 0, run_failure_log = NULL
        WHERE run_failures <> 0 AND escalated_at IS NULL
          AND ((NEW.issue_id IS NOT NULL AND id = NEW.issue_id)
            OR (NEW.issue_id IS NULL AND (checkout_run_id = NEW.id OR execution_run_id = NEW.id)));
        RETURN NULL;
    END IF;
    SELECT escalate_after_failures INTO lim FROM companies WHERE id = NEW.company_id;
    FOR iss IN
        UPDATE issues SET run_failures = run_failures + 1,
            run_failure_log = coalesce(run_failure_log || E'\n', '') || '- run ' || NEW.id || ': ' || NEW.status
                || coalesce(' (' || NEW.error_code || ')', '') || coalesce(': ' || left(NEW.error, 500), '')
        WHERE escalated_at IS NULL AND status <> 'done' AND status <> 'cancelled'
          AND ((NEW.issue_id IS NOT NULL AND id = NEW.issue_id)
            OR (NEW.issue_id IS NULL AND (checkout_run_id = NEW.id OR execution_run_id = NEW.id)))
        RETURNING id, company_id, identifier, status, checkout_run_id, execution_run_id, run_failures, run_failure_log
    LOOP
        n := iss.run_failures;
        IF lim IS NULL OR lim <= 0 OR n < lim THEN
            CONTINUE;
        END IF;
        -- E3: the runs still queued for the issue (a process-loss retry, a
        -- wake) are cancelled, each with its run.finished row.
        INSERT INTO activity (company_id, actor_type, actor_id, action, entity_type, entity_id, details)
        SELECT r.company_id, 'system', 'system', 'run.finished', 'run', r.id,
            jsonb_build_object('status', 'cancelled', 'exitCode', NULL, 'error', 'its issue was escalated to a person',
                'errorCode', 'issue_escalated')
        FROM runs r WHERE r.issue_id = iss.id AND r.status = 'queued';
        UPDATE runs SET status = 'cancelled', error_code = 'issue_escalated', error = 'its issue was escalated to a person',
            finished_at = now()
        WHERE issue_id = iss.id AND status = 'queued';
        body := format(E'Escalated to a person: the last %s runs of %s ended without success, so it is now blocked '
            'and no retry or wake takes it until someone moves it out of blocked.\n\n%s', n, iss.identifier, iss.run_failure_log);
        cid := gen_random_uuid()::text;
        INSERT INTO comments (id, company_id, issue_id, body, author_agent_id, author_board, run_id, created_at)
        VALUES (cid, iss.company_id, iss.id, body, NULL, false, NULL, now());
        UPDATE issues SET status = 'blocked', checkout_run_id = NULL, execution_run_id = NULL,
            execution_agent_name_key = NULL, execution_locked_at = NULL, escalated_at = now(), updated_at = now()
        WHERE id = iss.id;
        INSERT INTO activity (company_id, actor_type, actor_id, run_id, action, entity_type, entity_id, details)
        VALUES (iss.company_id, 'system', 'system', NEW.id, 'issue.escalated', 'issue', iss.id,
            jsonb_build_object('identifier', iss.identifier, 'failures', n, 'lastRunId', NEW.id,
                'previousStatus', iss.status, 'previousCheckoutRunId', iss.checkout_run_id,
                'previousExecutionRunId', iss.execution_run_id, 'commentId', cid, 'summary', body));
    END LOOP;
    RETURN NULL;
END;
$$;
-- +goose StatementEnd

CREATE TRIGGER runs_escalation AFTER UPDATE OF status ON runs
FOR EACH ROW WHEN ((OLD.status = 'queued' OR OLD.status = 'running')
    AND (NEW.status = 'failed' OR NEW.status = 'timed_out' OR NEW.status = 'succeeded'))
EXECUTE FUNCTION runs_escalation();

-- +goose StatementBegin
-- E3: a run queued for an escalated issue (a process-loss retry queued in
-- the statement that failed its run) is cancelled at once.
CREATE FUNCTION runs_queued_escalated() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF EXISTS (SELECT 1 FROM issues WHERE id = NEW.issue_id AND escalated_at IS NOT NULL) THEN
        INSERT INTO activity (company_id, actor_type, actor_id, action, entity_type, entity_id, details)
        SELECT r.company_id, 'system', 'system', 'run.finished', 'run', r.id,
            jsonb_build_object('status', 'cancelled', 'exitCode', NULL, 'error', 'its issue was escalated to a person',
                'errorCode', 'issue_escalated')
        FROM runs r WHERE r.id = NEW.id AND r.status = 'queued';
        UPDATE runs SET status = 'cancelled', error_code = 'issue_escalated', error = 'its issue was escalated to a person',
            finished_at = now()
        WHERE id = NEW.id AND status = 'queued';
    END IF;
    RETURN NULL;
END;
$$;
-- +goose StatementEnd

CREATE TRIGGER runs_queued_escalated AFTER INSERT ON runs
FOR EACH ROW WHEN (NEW.status = 'queued' AND NEW.issue_id IS NOT NULL)
EXECUTE FUNCTION runs_queued_escalated();

-- +goose StatementBegin
-- E4: an escalated issue that leaves blocked (a person's PATCH) is no
-- longer escalated, and its count starts again.
CREATE FUNCTION issues_unescalate() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    UPDATE issues SET escalated_at = NULL, run_failures = 0, run_failure_log = NULL WHERE id = NEW.id;
    RETURN NULL;
END;
$$;
-- +goose StatementEnd

CREATE TRIGGER issues_unescalate AFTER UPDATE OF status ON issues
FOR EACH ROW WHEN (OLD.status = 'blocked' AND NEW.status <> 'blocked' AND NEW.escalated_at IS NOT NULL)
EXECUTE FUNCTION issues_unescalate();
