package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/clasp-dev/clasp"
	"github.com/clasp-dev/clasp/internal/store"
)

// AgentUpdate changes an agent's status, name or role. Setting status
// terminated, in the same transaction: revokes its keys, ends its queued
// and running runs as cancelled with errorCode agent_terminated (one
// run.finished row each), and clears every lock naming those runs with one
// issue.lock_released {runId, runStatus} per issue (rule L6, as RunFinish),
// then unassigns every issue assigned to it that is not done or cancelled
// (in_progress becomes todo, any lock left is cleared; unassignOpenIssues).
// terminated is final. Errors: 400 invalid_request for a bad status or an
// empty name, 404 not_found, 409 already_exists for a taken name, 422
// precondition_failed (details.field status) for a terminated agent set to
// another status.
func (s *Store) AgentUpdate(ctx context.Context, p *store.AgentUpdateParams) (*clasp.Agent, error) {
	c, err := p.Validate()
	if err != nil {
		return nil, err
	}
	var out *clasp.Agent
	err = s.write(ctx, func(tx *wtx) error {
		a, err := store.ScanAgent(tx.queryRow(ctx, "AgentUpdate", sql.Named("id", p.AgentID), sql.Named("status", c.Status),
			sql.Named("name", c.Name), sql.Named("name_key", c.NameKey), sql.Named("role", c.Role)))
		switch {
		case errors.Is(err, sql.ErrNoRows):
			cur, err := noRow(store.ScanAgent(tx.queryRow(ctx, "AgentGet", sql.Named("id", p.AgentID))))
			if err != nil {
				return fmt.Errorf("get agent %s: %w", p.AgentID, err)
			}
			if err := store.AgentUpdateRefusal(p.AgentID, cur); err != nil {
				return err
			}
			return fmt.Errorf("update agent %s: refused for no known reason", p.AgentID)
		case isUnique(err):
			return store.ErrAgentNameTaken(*p.Name)
		case err != nil:
			return fmt.Errorf("update agent %s: %w", p.AgentID, err)
		}
		out = a
		if err := tx.logActivity(ctx, a.CompanyID, p.Actor, clasp.ActionAgentUpdated, "agent", a.ID, c.Details); err != nil {
			return err
		}
		if c.Terminates {
			return tx.agentTerminate(ctx, a, p.Actor)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// agentTerminate does the rest of a termination of agent a: it revokes its
// keys, ends its queued and running runs as cancelled (agent_terminated)
// with a run.finished row each, releases every lock naming them (rule
// L6, releaseRunLocks: one issue.lock_released per issue), and unassigns
// its open issues (unassignOpenIssues).
func (t *wtx) agentTerminate(ctx context.Context, a *clasp.Agent, actor store.Actor) error {
	if _, err := t.exec(ctx, "AgentRevokeKeys", sql.Named("agent", a.ID), sql.Named("now", t.now)); err != nil {
		return fmt.Errorf("revoke keys of agent %s: %w", a.ID, err)
	}
	if err := t.endRuns(ctx, actor, "agent "+a.ID, "AgentEndRuns", sql.Named("agent", a.ID), sql.Named("now", t.now)); err != nil {
		return err
	}
	return t.unassignOpenIssues(ctx, a.ID, actor)
}

// endRuns runs statement stmt, which ends runs and returns them (those of
// an agent being terminated, or of a key being revoked: what names them),
// then for each releases every lock naming it (rule L6, releaseRunLocks)
// and writes its run.finished row, as a finish would.
func (t *wtx) endRuns(ctx context.Context, actor store.Actor, what, stmt string, args ...any) error {
	rows, err := t.query(ctx, stmt, args...)
	if err != nil {
		return fmt.Errorf("end runs of %s: %w", what, err)
	}
	runs, err := scanAll(rows, store.ScanRun)
	if err != nil {
		return fmt.Errorf("end runs of %s: %w", what, err)
	}
	for _, run := range runs {
		if err := t.releaseRunLocks(ctx, run, actor); err != nil {
			return err
		}
		if err := t.logActivity(ctx, run.CompanyID, actor, clasp.ActionRunFinished, "run", run.ID, map[string]any{
			"status": run.Status, "exitCode": run.ExitCode, "error": run.Error, "errorCode": run.ErrorCode,
		}); err != nil {
			return err
		}
	}
	return nil
}

// unassignOpenIssues is the last step of terminating agent agentID (rule
// L6, agent terminated; statement AgentUnassignIssues): every issue
// assigned to it that is not done or cancelled loses its assignee and any
// lock left on it, in_progress becoming todo, with the rows of
// store.TerminateUnassignActivity each. AgentOpenIssues, read just before
// in the same write transaction, gives those rows the issues' state before
// the statement; it decides nothing.
func (t *wtx) unassignOpenIssues(ctx context.Context, agentID string, actor store.Actor) error {
	rows, err := t.query(ctx, "AgentOpenIssues", sql.Named("agent", agentID))
	if err != nil {
		return fmt.Errorf("read the open issues of agent %s: %w", agentID, err)
	}
	before, err := scanRows(rows, func(l *store.LockState) []any {
		return []any{&l.IssueID, &l.CompanyID, &l.Status, &l.Assignee, &l.Checkout, &l.Execution}
	})
	if err != nil {
		return fmt.Errorf("read the open issues of agent %s: %w", agentID, err)
	}
	if len(before) == 0 {
		return nil
	}
	old := make(map[string]*store.LockState, len(before))
	for i := range before {
		old[before[i].IssueID] = &before[i]
	}
	rows, err = t.query(ctx, "AgentUnassignIssues", sql.Named("agent", agentID), sql.Named("now", t.now))
	if err != nil {
		return fmt.Errorf("unassign the issues of agent %s: %w", agentID, err)
	}
	issues, err := scanAll(rows, store.ScanIssue)
	if err != nil {
		return fmt.Errorf("unassign the issues of agent %s: %w", agentID, err)
	}
	// In issue id order, as PostgreSQL writes them.
	slices.SortFunc(issues, func(x, y *clasp.Issue) int { return strings.Compare(x.ID, y.ID) })
	for _, iss := range issues {
		o, ok := old[iss.ID]
		if !ok { // the write transaction is the only writer: cannot happen
			return fmt.Errorf("unassign the issues of agent %s: issue %s was not read before", agentID, iss.ID)
		}
		if err := t.logAll(ctx, actor, store.TerminateUnassignActivity(o, iss)...); err != nil {
			return err
		}
	}
	return nil
}

// AgentKeyRevoke revokes key keyID of agent agentID and answers it;
// revoking a revoked key answers it unchanged. 404 not_found if the agent
// has no such key.
func (s *Store) AgentKeyRevoke(ctx context.Context, agentID, keyID string, actor store.Actor) (*clasp.APIKey, error) {
	var out *clasp.APIKey
	err := s.write(ctx, func(tx *wtx) error {
		// The runs opened with the key end first, their locks released
		// (rule L6), as a termination ends an agent's runs.
		if err := tx.endRuns(ctx, actor, "key "+keyID, "KeyEndRuns", sql.Named("id", keyID), sql.Named("agent", agentID), sql.Named("now", tx.now)); err != nil {
			return err
		}
		k, err := store.ScanKey(tx.queryRow(ctx, "KeyRevoke", sql.Named("id", keyID), sql.Named("agent", agentID), sql.Named("now", tx.now)))
		if errors.Is(err, sql.ErrNoRows) {
			out, err = store.ScanKey(tx.queryRow(ctx, "KeyGet", sql.Named("id", keyID), sql.Named("agent", agentID)))
			if errors.Is(err, sql.ErrNoRows) {
				return notFound("key", keyID)
			}
			return wrap(err, "get key %s", keyID)
		}
		if err != nil {
			return fmt.Errorf("revoke key %s: %w", keyID, err)
		}
		out = k
		a, err := tx.agent(ctx, agentID)
		if err != nil {
			return err
		}
		return tx.logActivity(ctx, a.CompanyID, actor, clasp.ActionAgentKeyRevoked, "agent", agentID, map[string]any{
			"keyId": k.ID, "prefix": k.Prefix,
		})
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// agent reads an agent in the write transaction; 404 not_found.
func (t *wtx) agent(ctx context.Context, id string) (*clasp.Agent, error) {
	a, err := store.ScanAgent(t.queryRow(ctx, "AgentGet", sql.Named("id", id)))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, notFound("agent", id)
	}
	if err != nil {
		return nil, fmt.Errorf("get agent %s: %w", id, err)
	}
	return a, nil
}
