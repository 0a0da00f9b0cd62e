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
--
-- Escalation (RULES.md, Escalation, E1-E4): a company escalates an issue
-- whose runs ended failed or timed out escalate_after_failures times in a
-- row (0: never). The issue counts them (run_failures, with a line per
-- failure in run_failure_log); the triggers below keep the count in the
-- transaction that ends each run, whatever statement ends it (a finish,
-- the sweeper's lease expiry, a lost process), and at the N-th the issue
-- moves to blocked with its locks cleared, the runs still queued for it
-- are cancelled, and one comment and one issue.escalated row are written,
-- all in that transaction. escalated_at marks it until it leaves blocked.

-- +goose Up
ALTER TABLE companies ADD COLUMN escalate_after_failures INTEGER NOT NULL DEFAULT 3
    CHECK (escalate_after_failures >= 0 AND escalate_after_failures <= 100);
ALTER TABLE issues ADD COLUMN run_failures INTEGER NOT NULL DEFAULT 0;
ALTER TABLE issues ADD COLUMN run_failure_log TEXT;
ALTER TABLE issues ADD COLUMN escalated_at INTEGER;
CREATE INDEX issues_escalated ON issues(company_id, escalated_at DESC) WHERE escalated_at IS NOT NULL;
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

-- +goose StatementBegin
-- E1: a run of an issue (its issue_id, else the issues it locks) that
-- ends failed or timed_out counts one failure of each such issue that is
-- open and not escalated, with a line saying what failed.
CREATE TRIGGER runs_failure_count AFTER UPDATE OF status ON runs
WHEN (OLD.status = 'queued' OR OLD.status = 'running') AND (NEW.status = 'failed' OR NEW.status = 'timed_out')
BEGIN
    UPDATE issues SET run_failures = run_failures + 1,
        run_failure_log = coalesce(run_failure_log || char(10), '') || '- run ' || NEW.id || ': ' || NEW.status
            || coalesce(' (' || NEW.error_code || ')', '') || coalesce(': ' || substr(NEW.error, 1, 500), '')
    WHERE escalated_at IS NULL AND status <> 'done' AND status <> 'cancelled'
      AND ((NEW.issue_id IS NOT NULL AND id = NEW.issue_id)
        OR (NEW.issue_id IS NULL AND (checkout_run_id = NEW.id OR execution_run_id = NEW.id)));
END;
-- +goose StatementEnd

-- +goose StatementBegin
-- E2: a run that succeeds resets the count of its issues.
CREATE TRIGGER runs_success_count AFTER UPDATE OF status ON runs
WHEN (OLD.status = 'queued' OR OLD.status = 'running') AND NEW.status = 'succeeded'
BEGIN
    UPDATE issues SET run_failures = 0, run_failure_log = NULL
    WHERE run_failures <> 0 AND escalated_at IS NULL
      AND ((NEW.issue_id IS NOT NULL AND id = NEW.issue_id)
        OR (NEW.issue_id IS NULL AND (checkout_run_id = NEW.id OR execution_run_id = NEW.id)));
END;
-- +goose StatementEnd

-- +goose StatementBegin
-- E3: at the company's escalate_after_failures-th failure in a row, in
-- the same transaction: the runs still queued for the issue are cancelled
-- (each with its run.finished row), one comment says what failed each
-- time, the issue moves to blocked with its locks cleared, and one
-- issue.escalated row is written.
CREATE TRIGGER issues_escalate AFTER UPDATE OF run_failures ON issues
WHEN NEW.run_failures > OLD.run_failures AND NEW.escalated_at IS NULL
    AND NEW.run_failures >= (SELECT c.escalate_after_failures FROM companies c WHERE c.id = NEW.company_id)
    AND (SELECT c.escalate_after_failures FROM companies c WHERE c.id = NEW.company_id) > 0
BEGIN
    INSERT INTO activity (company_id, actor_type, actor_id, action, entity_type, entity_id, details, created_at)
    SELECT r.company_id, 'system', 'system', 'run.finished', 'run', r.id,
        json_object('status', 'cancelled', 'exitCode', NULL, 'error', 'its issue was escalated to a person',
            'errorCode', 'issue_escalated'), CAST((julianday('now') - 2440587.5) * 86400000000 AS INTEGER)
    FROM runs r WHERE r.issue_id = NEW.id AND r.status = 'queued';
    UPDATE runs SET status = 'cancelled', error_code = 'issue_escalated', error = 'its issue was escalated to a person',
        finished_at = CAST((julianday('now') - 2440587.5) * 86400000000 AS INTEGER)
    WHERE issue_id = NEW.id AND status = 'queued';
    INSERT INTO comments (id, company_id, issue_id, body, author_agent_id, author_board, run_id, seq, created_at)
    VALUES (lower(hex(randomblob(4)) || '-' || hex(randomblob(2)) || '-4' || substr(hex(randomblob(2)), 2) || '-'
            || substr('89ab', 1 + (abs(random()) % 4), 1) || substr(hex(randomblob(2)), 2) || '-' || hex(randomblob(6))), NEW.company_id, NEW.id,
        'Escalated to a person: the last ' || NEW.run_failures || ' runs of ' || NEW.identifier
            || ' ended without success, so it is now blocked and no retry or wake takes it until someone moves it out of blocked.'
            || char(10) || char(10) || NEW.run_failure_log,
        NULL, 0, NULL, (SELECT coalesce(max(seq), 0) + 1 FROM comments WHERE issue_id = NEW.id), CAST((julianday('now') - 2440587.5) * 86400000000 AS INTEGER));
    UPDATE issues SET status = 'blocked', checkout_run_id = NULL, execution_run_id = NULL,
        execution_agent_name_key = NULL, execution_locked_at = NULL, escalated_at = CAST((julianday('now') - 2440587.5) * 86400000000 AS INTEGER), updated_at = CAST((julianday('now') - 2440587.5) * 86400000000 AS INTEGER)
    WHERE id = NEW.id;
    INSERT INTO activity (company_id, actor_type, actor_id, action, entity_type, entity_id, details, created_at)
    SELECT NEW.company_id, 'system', 'system', 'issue.escalated', 'issue', NEW.id,
        json_object('identifier', NEW.identifier, 'failures', NEW.run_failures,
            'previousStatus', NEW.status, 'previousCheckoutRunId', NEW.checkout_run_id,
            'previousExecutionRunId', NEW.execution_run_id, 'commentId', c.id, 'summary', c.body), CAST((julianday('now') - 2440587.5) * 86400000000 AS INTEGER)
    FROM comments c WHERE c.issue_id = NEW.id ORDER BY c.seq DESC LIMIT 1;
END;
-- +goose StatementEnd

-- +goose StatementBegin
-- E3: a run queued for an escalated issue (a process-loss retry) is
-- cancelled at once.
CREATE TRIGGER runs_queued_escalated AFTER INSERT ON runs
WHEN NEW.status = 'queued' AND NEW.issue_id IS NOT NULL
    AND EXISTS (SELECT 1 FROM issues i WHERE i.id = NEW.issue_id AND i.escalated_at IS NOT NULL)
BEGIN
    INSERT INTO activity (company_id, actor_type, actor_id, action, entity_type, entity_id, details, created_at)
    VALUES (NEW.company_id, 'system', 'system', 'run.finished', 'run', NEW.id,
        json_object('status', 'cancelled', 'exitCode', NULL, 'error', 'its issue was escalated to a person',
            'errorCode', 'issue_escalated'), CAST((julianday('now') - 2440587.5) * 86400000000 AS INTEGER));
    UPDATE runs SET status = 'cancelled', error_code = 'issue_escalated', error = 'its issue was escalated to a person',
        finished_at = CAST((julianday('now') - 2440587.5) * 86400000000 AS INTEGER)
    WHERE id = NEW.id;
END;
-- +goose StatementEnd

-- +goose StatementBegin
-- E4: an escalated issue that leaves blocked (a person's PATCH) is no
-- longer escalated, and its count starts again.
CREATE TRIGGER issues_unescalate AFTER UPDATE OF status ON issues
WHEN OLD.status = 'blocked' AND NEW.status <> 'blocked' AND NEW.escalated_at IS NOT NULL
BEGIN
    UPDATE issues SET escalated_at = NULL, run_failures = 0, run_failure_log = NULL WHERE id = NEW.id;
END;
-- +goose StatementEnd
