-- clasp schema v12 for PostgreSQL: autovacuum settings of issues for
-- claim-next. A claim moves its issue out of issues_claim_unassigned (it is
-- no longer unassigned), but the old index entry stays, at the front of the
-- range the next claim scans, until VACUUM removes it: every claim of a
-- drain steps through the leaf pages of all the issues claimed before it.
-- With the default settings autovacuum waits for 20 % of the table's rows
-- to be dead, which on a table of 1,000,000 issues is a drain of 200,000,
-- and then may skip the indexes when few heap pages hold dead rows (index
-- cleanup "auto"), which is exactly a drain's case on a large table. Here
-- 1,000 dead rows plus 1 % of the table start a vacuum, and a vacuum always
-- cleans the indexes. (No SQLite counterpart: its b-trees drop a deleted
-- entry at once.)

-- +goose Up
ALTER TABLE issues SET (autovacuum_vacuum_scale_factor = 0.01, autovacuum_vacuum_threshold = 1000, vacuum_index_cleanup = on);
