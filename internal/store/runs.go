package store

// A run's end (rule L6), the sweeper's passes (RULES.md, The sweeper) and
// the reads of runs, written once for every dialect: validation, the
// order of the steps, the explanation of a refusal and the batching of a
// pass. A dialect's Driver runs the statements: one transaction for a
// run's end, one for each batch of a pass.

import (
	"context"
	"fmt"
	"strings"

	"github.com/clasp-dev/clasp"
)

// runDriver is the part of Driver for a run's end and the sweeper's
// passes. Each method runs in one transaction of its own and answers the
// translated error of the database; none decides a refusal, since the
// statements' WHERE clauses are the decision.
type runDriver interface {
	// RunFinish runs, in one transaction, statement RunFinish with
	// RunFinishArgs(p) (p validated: ValidateRunFinish) and, when it ended
	// the run, rule L6 (statement ReleaseRunLocks: every lock naming the
	// run cleared, one issue.lock_released {runId, runStatus} per issue),
	// run.finished (RunFinishedActivity), and the promotion of the wakes
	// deferred behind the run. It answers the ended run, or nil and no
	// error when RunFinish matched no row (nothing was written).
	RunFinish(ctx context.Context, p *RunFinishParams) (*clasp.Run, error)
	// RunSweepExpired runs one batch of sweeper pass 1 (statement
	// SweepExpiredRuns) in one transaction: at most SweepBatch running
	// runs whose lease expired become failed with errorCode lease_expired,
	// one run.lost {agentId, errorCode, leaseExpiresAt} each (actor
	// system). It answers how many runs it failed.
	RunSweepExpired(ctx context.Context) (int, error)
	// IssueClearStaleLocks runs one batch of sweeper pass 2 (statements
	// StaleLockCandidates, then ClearStaleLocks): at most SweepBatch
	// locked issues whose referenced runs all looked dead are found, and
	// the locks of those still stale when the write re-checks them are
	// cleared in one transaction, one issue.stale_lock_cleared
	// (StaleLock.Activity) each. It answers how many issues it found and
	// how many of them it cleared.
	IssueClearStaleLocks(ctx context.Context) (found, cleared int, err error)
}

// Runs implements the Store methods of a run's end, the sweeper's passes
// and the reads of runs (list, authentication) on a dialect's Driver.
// DB embeds it (NewRuns).
type Runs struct{ d Driver }

// NewRuns returns the run methods running on d.
func NewRuns(d Driver) Runs { return Runs{d: d} }

// RunFinish ends run p.RunID with terminal p.Status and, in the same
// transaction, clears every lock naming it with one issue.lock_released
// {runId, runStatus} per issue (rule L6), then writes run.finished and
// promotes the wakes deferred behind the run (Driver.RunFinish). An
// agent may finish only its own live run; the board any non-terminal run.
// It answers the ended run. Errors: those of ValidateRunFinish, and, when
// the statement matched no row, those of RunRefusal on the run as read
// next (CallerRunRead: a run's state only moves forward, so the read
// explains the refusal).
func (r Runs) RunFinish(ctx context.Context, p *RunFinishParams) (*clasp.Run, error) {
	if err := ValidateRunFinish(p); err != nil {
		return nil, err
	}
	run, err := r.d.RunFinish(ctx, p)
	if err != nil || run != nil {
		return run, err
	}
	st, err := CallerRunRead(ctx, r.d, r.d.Read(), p.RunID)
	if err != nil {
		return nil, r.d.Translate(err)
	}
	return nil, RunRefusal(p.Actor, p.RunID, st)
}

// RunFinishArgs are the arguments of statement RunFinish for finish p, by
// the same names in every dialect: run, status, exit_code (an int64),
// error and error_code (strings; nil, NULL, when unset), board (the actor
// is not an agent), agent and company (the acting agent's), and the
// actor's (ActorArgs).
func RunFinishArgs(p *RunFinishParams) Args {
	a := p.Actor
	var exitCode any
	if p.ExitCode != nil {
		exitCode = int64(*p.ExitCode)
	}
	return ActorArgs(Args{"run": p.RunID, "status": string(p.Status), "exit_code": exitCode,
		"error": OrNil(p.Error), "error_code": OrNil(p.ErrorCode),
		"board": a.Type != clasp.ActorAgent, "agent": a.AgentID, "company": a.CompanyID}, a)
}

// CallerRunRead reads run runID's agent, company and state through q
// (statement CallerRunRead; d tells its no-row error) to explain a
// refusal: Found false when it does not exist. The error is the
// database's, untranslated.
func CallerRunRead(ctx context.Context, d Driver, q Querier, runID string) (RunState, error) {
	r := RunState{Found: true}
	err := q.QueryRow(ctx, "CallerRunRead", Args{"run": runID}).Scan(&r.AgentID, &r.CompanyID, &r.State)
	if d.NoRows(err) {
		return RunState{}, nil
	}
	if err != nil {
		return RunState{}, fmt.Errorf("read run %s: %w", runID, err)
	}
	return r, nil
}

// SweepExpiredRuns is sweeper pass 1: running runs whose lease expired
// (by the store's clock: SQLite's process clock, PostgreSQL's database
// clock) become failed with errorCode lease_expired, one run.lost row each
// (actor system), in batches of SweepBatch per transaction
// (Driver.RunSweepExpired, Sweep). It returns how many runs it failed.
// Safe to run concurrently, on any number of replicas: each run is failed
// once.
func (r Runs) SweepExpiredRuns(ctx context.Context) (int, error) {
	return Sweep(func() (found, changed int, err error) {
		n, err := r.d.RunSweepExpired(ctx)
		return n, n, err
	})
}

// SweepStaleLocks is sweeper pass 2: the locks of issues whose referenced
// runs are all dead (terminal, lost or missing) are cleared, with one
// issue.stale_lock_cleared {clearedCheckoutRunId, clearedExecutionRunId,
// why} each (actor system), at most SweepBatch issues per transaction
// (Driver.IssueClearStaleLocks, Sweep). Each write re-checks deadness,
// so concurrent sweepers clear each issue once and never an issue a
// checkout has just taken over. It returns how many issues it cleared; a
// second pass clears nothing.
func (r Runs) SweepStaleLocks(ctx context.Context) (int, error) {
	return Sweep(func() (found, cleared int, err error) { return r.d.IssueClearStaleLocks(ctx) })
}

// RunList lists the runs of company p.CompanyID, newest first, one keyset
// page at a time, narrowed to p.Statuses and p.AgentID when set; it
// answers the page and the cursor of the next one ("" after the last).
func (r Runs) RunList(ctx context.Context, p *RunListParams) ([]*clasp.Run, string, error) {
	where, args := []string{"company_id = ?"}, []any{p.CompanyID}
	if len(p.Statuses) > 0 {
		where = append(where, "status IN (?"+strings.Repeat(", ?", len(p.Statuses)-1)+")")
		for _, st := range p.Statuses {
			args = append(args, string(st))
		}
	}
	if p.AgentID != "" {
		where, args = append(where, "agent_id = ?"), append(args, p.AgentID)
	}
	return ListPage(ctx, r.d, "runs", RunCols, where, args, p.Page, false, ScanRun,
		func(run *clasp.Run) string { return EncodeCursor(run.CreatedAt, run.ID) })
}

// RunAuthenticate finds the live run (by the store's clock) whose run
// token hashes to tokenHash, and its agent, in one read (statement
// RunAuth: the run's columns, whether it is live, the agent's columns).
// 401 unauthenticated if the token is empty or unknown, the run is not
// live, or the agent is terminated.
func (r Runs) RunAuthenticate(ctx context.Context, tokenHash string) (*clasp.Agent, *clasp.Run, error) {
	if tokenHash == "" {
		return nil, nil, ErrUnauthenticated()
	}
	var (
		run  clasp.Run
		a    clasp.Agent
		live bool
	)
	dest := append(RunDest(&run), &live)
	err := r.d.Read().QueryRow(ctx, "RunAuth", Args{"hash": tokenHash}).Scan(append(dest, AgentDest(&a)...)...)
	if r.d.NoRows(err) {
		return nil, nil, ErrUnauthenticated()
	}
	if err != nil {
		return nil, nil, r.d.Translate(fmt.Errorf("authenticate run token: %w", err))
	}
	if !live || a.Status == clasp.AgentTerminated {
		return nil, nil, ErrUnauthenticated()
	}
	return &a, &run, nil
}
