-- clasp schema v9: agent API keys have a name, a label for people
-- (Paperclip's key create takes {"name": ...}; its default is "default").
-- The SQLite schema v11 does the same.

-- +goose Up
ALTER TABLE agent_api_keys ADD COLUMN name TEXT NOT NULL DEFAULT 'default';
