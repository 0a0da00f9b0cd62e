-- clasp schema v11: agent API keys have a name, a label for people
-- (Paperclip's key create takes {"name": ...}; its default is "default").
-- The PostgreSQL schema v9 does the same.

-- +goose Up
ALTER TABLE agent_api_keys ADD COLUMN name TEXT NOT NULL DEFAULT 'default';
