-- clasp schema v7: the agents of a company in keyset order (created_at, id),
-- the order and cursor of AgentList, so that a page of a company with
-- 10,000 agents reads its rows from the index instead of sorting all of
-- them (keyset pagination; PostgreSQL has had this index,
-- agents_company_created, since its schema v1).

-- +goose Up
CREATE INDEX agents_company_created ON agents(company_id, created_at, id);
