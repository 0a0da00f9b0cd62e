-- clasp schema v14: the partial index issues_checkout_run goes. L7 (the
-- issues table's CHECK) makes every row whose checkout_run_id is set
-- carry the same run in execution_run_id, so issues_execution_run finds
-- every row issues_checkout_run found, in the same order: the sweeper's
-- candidates and the release of a finished run's locks read through it
-- (sql/lock.sql). Each checkout and release then maintains one index
-- fewer. The PostgreSQL schema keeps its indexes.

-- +goose Up
DROP INDEX issues_checkout_run;
