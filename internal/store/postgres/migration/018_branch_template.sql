-- clasp schema v18 for PostgreSQL: a company's branch template names the
-- git branch of each issue's work ({identifier} and {prefix} replaced;
-- RULES.md, The git gate, G5). Existing companies keep the branches they
-- had. As the SQLite schema v20.

-- +goose Up
ALTER TABLE companies ADD COLUMN branch_template text NOT NULL DEFAULT 'clasp/{identifier}';
