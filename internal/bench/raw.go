package bench

import (
	"context"
	"database/sql"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/clasp-dev/clasp/internal/store"
	"github.com/clasp-dev/clasp/internal/store/postgres"
	"github.com/clasp-dev/clasp/internal/store/sqlite"
)

// The raw limit (target raw) of a cycle: clasp's own statements of an
// uncontended checkout and release, run straight through the driver on a
// store of the bench's own, with the store's arguments, their answers
// scanned into plain variables; none of the store's Go code around them
// (no group commit, no refusal paths, no HTTP). Its store must not share
// its database with a server.

// sqliteRaw is the raw limit's runner on a SQLite store: its writer
// connection and statements Checkout, Release and ActivityInsert prepared
// on it (sqlite.Driver.Writer).
type sqliteRaw struct {
	w                           *sql.DB
	checkout, release, activity *sql.Stmt
}

// newSQLiteRawRunner returns the raw runner of st.
func newSQLiteRawRunner(st *sqlite.Driver) *sqliteRaw {
	w, stmt := st.Writer()
	return &sqliteRaw{w: w, checkout: stmt("Checkout"), release: stmt("Release"), activity: stmt("ActivityInsert")}
}

// Checkout runs one checkout transaction: BEGIN IMMEDIATE, statement
// Checkout on its fast path (an unlocked issue in todo) with its RETURNING
// row read, one issue.checked_out activity INSERT, COMMIT (one fsync with
// synchronous=FULL). It fails if the UPDATE matches no row.
func (r *sqliteRaw) Checkout(ctx context.Context, p rawStep) error {
	return r.step(ctx, r.checkout, p, "issue.checked_out", sql.Named("unlocked_only", true), sql.Named("expected", ",todo,"))
}

// Release runs one release transaction: statement Release on its fast
// path (the run holds both locks; the assignee stays), one issue.released
// activity INSERT, COMMIT. It fails if the UPDATE matches no row.
func (r *sqliteRaw) Release(ctx context.Context, p rawStep) error {
	return r.step(ctx, r.release, p, "issue.released", sql.Named("held_only", true), sql.Named("unassign", false), sql.Named("board", false))
}

func (r *sqliteRaw) step(ctx context.Context, upd *sql.Stmt, p rawStep, action string, extra ...any) error {
	now := time.Now().UnixMicro()
	tx, err := r.w.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("raw %s: begin: %w", action, err)
	}
	defer tx.Rollback()
	args := append([]any{sql.Named("rid", p.IssueID), sql.Named("rident", ""), sql.Named("company", p.CompanyID),
		sql.Named("agent", p.AgentID), sql.Named("run", p.RunID), sql.Named("now", now)}, extra...)
	rows, err := tx.StmtContext(ctx, upd).QueryContext(ctx, args...)
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
	if upd == r.release {
		details = `{"previousCheckoutRunId":"` + p.RunID + `","previousExecutionRunId":"` + p.RunID + `","unassigned":false}`
	}
	// statement ActivityInsert's arguments, as the store passes them
	if _, err := tx.StmtContext(ctx, r.activity).ExecContext(ctx, sql.Named("company", p.CompanyID),
		sql.Named("actor_type", "agent"), sql.Named("actor_id", p.AgentID), sql.Named("actor_run", p.RunID),
		sql.Named("action", action), sql.Named("entity_type", "issue"), sql.Named("entity_id", p.IssueID),
		sql.Named("details", details), sql.Named("now", now), sql.Named("actor_request", nil)); err != nil {
		return fmt.Errorf("raw %s: activity: %w", action, err)
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("raw %s: commit: %w", action, err)
	}
	return nil
}

// numIssueCols is how many columns store.IssueCols lists; issueColEpoch is
// the position of checkout_epoch among them.
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

// postgresRawCheckout runs statement Checkout for p (expected status todo)
// on st's pool, one statement (the conditional UPDATE and its activity
// INSERT in one CTE) in its own implicit transaction, and fails if it
// changed nothing.
func postgresRawCheckout(ctx context.Context, st *postgres.Driver, p rawStep) error {
	return postgresRawStep(ctx, st, "checkout", "Checkout", p)
}

// postgresRawRelease runs statement Release for p (the assignee stays) and
// fails if it changed nothing.
func postgresRawRelease(ctx context.Context, st *postgres.Driver, p rawStep) error {
	return postgresRawStep(ctx, st, "release", "Release", p)
}

// lockStateCols is how many columns of a lock rule's answer follow the
// issue's: status, assignee, the two lock columns and their run states,
// the caller's run (agent, company, state), owned_by_caller, agent_active,
// assignee_in_company, ok, run_ended and escalated.
const lockStateCols = 15

func postgresRawStep(ctx context.Context, st *postgres.Driver, what, name string, p rawStep) error {
	args := map[string]any{"rid": p.IssueID, "rident": "", "company": p.CompanyID, "run": p.RunID, "agent": p.AgentID, "board": false,
		"actor_type": "agent", "actor_id": p.AgentID, "actor_run": p.RunID, "expected": []string{"todo"}, "unassign": false}
	// the answer columns of every lock rule statement (sql/lock.sql):
	// changed, the issue's columns (store.IssueCols), then the old lock
	// state's lockStateCols columns; only changed is read.
	var changed bool
	dest := []any{&changed}
	for range strings.Count(store.IssueCols, ",") + 1 + lockStateCols {
		dest = append(dest, new(any))
	}
	err := st.QueryRowNamed(ctx, name, args).Scan(dest...)
	if err != nil {
		return fmt.Errorf("raw %s of issue %s: %w", what, p.IssueID, err)
	}
	if !changed {
		return fmt.Errorf("raw %s of issue %s: nothing changed", what, p.IssueID)
	}
	return nil
}
