-- clasp schema v13: the CHECK constraints that name a column's allowed
-- values as an IN list (status, priority, actor_type, resource_type) say
-- the same as a chain of equalities. SQLite evaluates an IN list of three
-- or more constants by building a temporary index of the list each time a
-- statement checks it: every activity row inserted and every issue status
-- change paid for opening, filling and closing one. A chain of equalities
-- is plain comparisons. The allowed values are the same, so no row is
-- touched: only the tables' definitions in sqlite_schema change (the
-- procedure of https://sqlite.org/lang_altertable.html for changes that
-- leave the stored content as it is), and a database whose definition
-- differs from the text replaced keeps its own. The PostgreSQL schema
-- needs nothing: its IN lists are plain comparisons already.

-- +goose Up
PRAGMA writable_schema = ON;

UPDATE sqlite_schema SET sql = replace(replace(sql,
    'CHECK (status IN (''backlog'',''todo'',''in_progress'',''in_review'',''blocked'',''done'',''cancelled''))',
    'CHECK (status = ''backlog'' OR status = ''todo'' OR status = ''in_progress'' OR status = ''in_review'' OR status = ''blocked'' OR status = ''done'' OR status = ''cancelled'')'),
    'CHECK (priority IN (''critical'',''high'',''medium'',''low''))',
    'CHECK (priority = ''critical'' OR priority = ''high'' OR priority = ''medium'' OR priority = ''low'')')
WHERE type = 'table' AND name = 'issues';

UPDATE sqlite_schema SET sql = replace(sql,
    'CHECK (actor_type IN (''agent'',''board'',''system''))',
    'CHECK (actor_type = ''agent'' OR actor_type = ''board'' OR actor_type = ''system'')')
WHERE type = 'table' AND name = 'activity';

UPDATE sqlite_schema SET sql = replace(sql,
    'CHECK (status IN (''queued'',''running'',''succeeded'',''failed'',''cancelled'',''timed_out''))',
    'CHECK (status = ''queued'' OR status = ''running'' OR status = ''succeeded'' OR status = ''failed'' OR status = ''cancelled'' OR status = ''timed_out'')')
WHERE type = 'table' AND name = 'runs';

UPDATE sqlite_schema SET sql = replace(sql,
    'CHECK (status IN (''active'',''paused'',''terminated''))',
    'CHECK (status = ''active'' OR status = ''paused'' OR status = ''terminated'')')
WHERE type = 'table' AND name = 'agents';

UPDATE sqlite_schema SET sql = replace(sql,
    'CHECK (status IN (''queued'',''coalesced'',''deferred'',''skipped''))',
    'CHECK (status = ''queued'' OR status = ''coalesced'' OR status = ''deferred'' OR status = ''skipped'')')
WHERE type = 'table' AND name = 'wake_requests';

UPDATE sqlite_schema SET sql = replace(sql,
    'CHECK (resource_type IN (''issue'',''comment'',''run'',''issue_update''))',
    'CHECK (resource_type = ''issue'' OR resource_type = ''comment'' OR resource_type = ''run'' OR resource_type = ''issue_update'')')
WHERE type = 'table' AND name = 'idempotency_keys';

-- Reload the definitions on this connection (and turn schema writes off).
PRAGMA writable_schema = RESET;

-- Any schema change moves the schema cookie, which makes every other
-- connection to the file reload the definitions too.
CREATE TABLE schema_reload (x);
DROP TABLE schema_reload;
