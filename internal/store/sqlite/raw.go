package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/clasp-dev/clasp/internal/store"
)

// Raw runs the statements of an uncontended checkout and release straight
// through database/sql, each step in its own BEGIN IMMEDIATE ... COMMIT on
// the store's writer connection: no group commit, no HTTP, none of the
// store's Go logic around the statements. It is the raw limit `clasp
// bench` compares the server with, on a store of its own. For
// benchmarks only: it skips the lock rules' refusal paths and must not
// share a database with a server.
type Raw struct{ s *Store }

// Raw returns the raw-limit runner of s.
func (s *Store) Raw() *Raw { return &Raw{s: s} }

// RawStep names one issue, the agent and its run, in company CompanyID.
type RawStep struct {
	IssueID, AgentID, RunID, CompanyID string
}

// Checkout runs one checkout transaction: the L1 UPDATE on its fast path
// (an unlocked issue in todo) with its RETURNING row read, one
// issue.checked_out activity INSERT, COMMIT (one fsync with
// synchronous=FULL). It fails if the UPDATE matches no row.
func (r *Raw) Checkout(ctx context.Context, p RawStep) error {
	return r.step(ctx, "Checkout", p, "issue.checked_out", sql.Named("unlocked_only", true), sql.Named("expected", ",todo,"))
}

// Release runs one release transaction: the L4 UPDATE on its fast path
// (the run holds both locks; the assignee stays), one issue.released
// activity INSERT, COMMIT. It fails if the UPDATE matches no row.
func (r *Raw) Release(ctx context.Context, p RawStep) error {
	return r.step(ctx, "Release", p, "issue.released", sql.Named("held_only", true), sql.Named("unassign", false), sql.Named("board", false))
}

func (r *Raw) step(ctx context.Context, q string, p RawStep, action string, extra ...any) error {
	s := r.s
	now := time.Now().UnixMicro()
	tx, err := s.w.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("raw %s: begin: %w", action, err)
	}
	defer tx.Rollback()
	args := append([]any{sql.Named("rid", p.IssueID), sql.Named("rident", ""), sql.Named("company", p.CompanyID),
		sql.Named("agent", p.AgentID), sql.Named("run", p.RunID), sql.Named("now", now)}, extra...)
	rows, err := tx.StmtContext(ctx, s.ws[q]).QueryContext(ctx, args...)
	if err != nil {
		return fmt.Errorf("raw %s: %w", action, err)
	}
	var epoch int64
	if rows.Next() {
		cols := make([]any, numIssueCols)
		var raw sql.RawBytes
		for i := range cols {
			cols[i] = &raw
		}
		cols[issueColEpoch] = &epoch
		err = rows.Scan(cols...)
	} else {
		err = fmt.Errorf("no row changed")
	}
	_ = rows.Close() // rows.Err, checked next, reports the statement's failure
	if err == nil {
		err = rows.Err()
	}
	if err != nil {
		return fmt.Errorf("raw %s of issue %s: %w", action, p.IssueID, err)
	}
	// The activity details the store writes for these two steps.
	details := `{"agentId":"` + p.AgentID + `","runId":"` + p.RunID + `","checkoutEpoch":` + strconv.FormatInt(epoch, 10) + `}`
	if q == "Release" {
		details = `{"previousCheckoutRunId":"` + p.RunID + `","previousExecutionRunId":"` + p.RunID + `","unassigned":false}`
	}
	if _, err := tx.StmtContext(ctx, s.ws["ActivityInsert"]).ExecContext(ctx, activityArgs(p.CompanyID, "agent", p.AgentID, p.RunID,
		action, "issue", p.IssueID, details, now, nil)...); err != nil {
		return fmt.Errorf("raw %s: activity: %w", action, err)
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("raw %s: commit: %w", action, err)
	}
	return nil
}

// numIssueCols is how many columns store.IssueCols lists; issueColEpoch is the
// position of checkout_epoch among them.
var numIssueCols, issueColEpoch = issueColumn("checkout_epoch")

func issueColumn(name string) (n, at int) {
	cols := strings.Split(store.IssueCols, ",")
	at = -1
	for i, c := range cols {
		if strings.TrimSpace(c) == name {
			at = i
		}
	}
	return len(cols), at
}
