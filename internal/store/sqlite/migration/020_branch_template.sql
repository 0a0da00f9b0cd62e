-- clasp schema v20: a company's branch template names the git branch of
-- each issue's work ({identifier} and {prefix} replaced; RULES.md, The
-- git gate, G5). Existing companies keep the branches they had. The
-- PostgreSQL schema v18 does the same.

-- +goose Up
ALTER TABLE companies ADD COLUMN branch_template TEXT NOT NULL DEFAULT 'clasp/{identifier}';
