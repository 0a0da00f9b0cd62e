package store

// A run's opening, its signs of life, its end (rule L6), the sweeper's
// passes (RULES.md, The sweeper) and the reads of runs, written once for
// every dialect: validation, the order of the steps, the Idempotency-Key
// policy, the explanation of a refusal and the batching of a pass. A
// dialect's Driver runs the statements: one (or, on SQLite, one per
// step in the caller's write) for an open or a renewal, one transaction
// for a run's end, one for each batch of a pass.

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/clasp-dev/clasp"
)

// runDriver is the part of Driver for a run's opening, signs of life and
// end and the sweeper's passes. The methods that take a Querier
// run their statements through it, in the caller's write, and answer the
// driver's untranslated error; the others run in one transaction of their
// own and answer the translated error. None decides a refusal, since the
// statements' WHERE clauses are the decision.
type runDriver interface {
	// RunOpen runs statement RunOpen with o.Args() through q, the write
	// Querier of the open's write (Write): an active agent's new running
	// run, with its issue when o.IssueID names one of the agent's
	// company, under the limit o.MaxLive when positive (counted so that
	// concurrent opens never pass it), and the agent's heartbeat. It
	// answers the run, or nil and no error when the statement inserted
	// nothing (agent missing or terminated, issue not found, limit
	// reached). The caller writes run.started (activity) and records
	// the Idempotency-Key (idempotent) in the same write.
	RunOpen(ctx context.Context, q Querier, o *RunOpening) (*clasp.Run, error)
	// RunReplayOpen runs statement RunReplayOpen with o.Args() through
	// q: the recorded run o.ID, while live and holding o's token hash,
	// gets its lease renewed to now + o.TTL, with the agent's heartbeat.
	// It answers the run, or nil and no error when nothing matched.
	RunReplayOpen(ctx context.Context, q Querier, o *RunOpening) (*clasp.Run, error)
	// RunTouch runs statement RunTouch with RunTouchArgs(p) through q:
	// run p.RunID of p.AgentID, while live, gets its lease renewed to now
	// + p.TTL(), with the agent's heartbeat. It answers the run, or nil
	// and no error when nothing matched.
	RunTouch(ctx context.Context, q Querier, p *RunTouchParams) (*clasp.Run, error)
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
	// {clearedCheckoutRunId, clearedExecutionRunId, why} each. It answers
	// how many issues it found and how many of them it cleared.
	IssueClearStaleLocks(ctx context.Context) (found, cleared int, err error)
}

// Runs implements the Store methods of a run's opening, signs of life and
// end, the sweeper's passes and the reads of runs (list, authentication)
// on a dialect's Driver. DB embeds it (NewRuns).
type Runs struct {
	d Driver
	c CRUD // the Idempotency-Key lookup of an open
}

// NewRuns returns the run methods running on d, looking Idempotency-Keys
// up with c (the dialect's CRUD, on d).
func NewRuns(d Driver, c CRUD) Runs { return Runs{d: d, c: c} }

// RunOpening is an open of a run as the driver's statements take it: the
// caller's parameters, the run's id (a new run's, or for a replay the
// recorded run's), and the lease and invocation source Check filled in.
type RunOpening struct {
	*RunOpenParams
	ID     string
	TTL    time.Duration
	Source string
}

// Args are the arguments of statements RunOpen and RunReplayOpen, by the
// same names in every dialect: id, agent, source, ttl_us (the lease in
// microseconds), token_hash (TokenHashOf the id) and key_hash (nil, NULL,
// when unset), max_live, issue_ref (the reference as given, "" for none)
// with rid and rident (SplitRef), the actor's (ActorArgs) and the
// Idempotency-Key record's (IdemArgs).
func (o *RunOpening) Args() Args {
	rid, rident := SplitRef(o.IssueID)
	return IdemArgs(ActorArgs(Args{"id": o.ID, "agent": o.AgentID, "source": o.Source, "ttl_us": o.TTL.Microseconds(),
		"token_hash": nullable(o.TokenHashOf(o.ID)), "key_hash": nullable(o.KeyHash), "max_live": o.MaxLive,
		"issue_ref": o.IssueID, "rid": rid, "rident": rident}, o.Actor), o.Idempotency, IdemRun)
}

// RunOpen opens a running run of agent p.AgentID with a lease of p's TTL
// (Check), its token hash and key hash, on issue p.IssueID when set, and
// records the agent's heartbeat and run.started {agentId, issueId,
// invocationSource}, as one write (Driver.RunOpen). With
// p.Idempotency, a repeat of an earlier open opens nothing: it renews the
// recorded run's lease as a sign of life and answers it
// (Driver.RunReplayOpen; idempotent). Errors: those of Check, 404
// not_found for the agent or the issue, 403 forbidden for a terminated
// agent, 429 rate_limited at p.MaxLive (runOpenRefused), the refusals of
// a replay (RunReplayRefusal), 422 idempotency_key_reused.
func (r Runs) RunOpen(ctx context.Context, p *RunOpenParams) (*clasp.Run, error) {
	ttl, source, err := p.Check()
	if err != nil {
		return nil, err
	}
	o := &RunOpening{RunOpenParams: p, ID: r.d.NewID(), TTL: ttl, Source: source}
	return idempotent(ctx, r.c, r.d.Write, p.Idempotency, IdemRun, func(run *clasp.Run) string { return run.ID },
		func(q Querier) (*clasp.Run, error) {
			run, err := r.d.RunOpen(ctx, q, o)
			if err != nil {
				return nil, fmt.Errorf("open run of agent %s: %w", p.AgentID, err)
			}
			if run == nil {
				return nil, r.runOpenRefused(ctx, q, o)
			}
			return run, activity(ctx, q, run.CompanyID, p.Actor, clasp.ActionRunStarted, "run", run.ID,
				map[string]any{"agentId": run.AgentID, "issueId": run.IssueID, "invocationSource": source})
		},
		func(q Querier, id string) (*clasp.Run, error) {
			replay := *o
			replay.ID = id
			run, err := r.d.RunReplayOpen(ctx, q, &replay)
			if err != nil || run != nil {
				return run, Wrap(err, "reopen run %s", id)
			}
			st, err := CallerRunRead(ctx, r.d, q, id)
			if err != nil {
				return nil, err
			}
			return nil, RunReplayRefusal(id, p.AgentID, st)
		})
}

// runOpenRefused explains an open o whose statement inserted nothing,
// read through q, the open's write: 404 not_found for a missing agent,
// 403 forbidden for a terminated one (ErrAgentTerminated), 404 not_found
// for an issue o.IssueID not of the agent's company (statement IssueRef),
// else 429 rate_limited (ErrLiveRunsLimit) when o.MaxLive is positive.
// Reading on q, never on another connection, matters on PostgreSQL: the
// opens waiting for the agent's row lock each hold a connection.
func (r Runs) runOpenRefused(ctx context.Context, q Querier, o *RunOpening) error {
	a, err := ScanAgent(q.QueryRow(ctx, "AgentGet", Args{"id": o.AgentID}))
	switch {
	case r.d.NoRows(err):
		return ErrNotFound("agent", o.AgentID)
	case err != nil:
		return fmt.Errorf("get agent %s: %w", o.AgentID, err)
	case a.Status == clasp.AgentTerminated:
		return ErrAgentTerminated(a.ID)
	}
	if o.IssueID != "" {
		rid, rident := SplitRef(o.IssueID)
		var id string
		err := q.QueryRow(ctx, "IssueRef", Args{"rid": rid, "rident": rident, "company": a.CompanyID}).Scan(&id)
		if r.d.NoRows(err) {
			return ErrNotFound("issue", o.IssueID)
		}
		if err != nil {
			return fmt.Errorf("find issue %s: %w", o.IssueID, err)
		}
	}
	if o.MaxLive > 0 {
		return ErrLiveRunsLimit(a.ID, o.MaxLive, o.TTL)
	}
	return fmt.Errorf("open run of agent %s: refused for no known reason", o.AgentID)
}

// RunTouchArgs are the arguments of statements RunTouch and RunRecent for
// p, by the same names in every dialect: run, agent, ttl_us (TTL, in
// microseconds) and min_us (MinRenewInterval, in microseconds).
func RunTouchArgs(p *RunTouchParams) Args {
	return Args{"run": p.RunID, "agent": p.AgentID, "ttl_us": p.TTL().Microseconds(),
		"min_us": p.MinRenewInterval.Microseconds()}
}

// RunTouch is a sign of life of run p.RunID by agent p.AgentID: while the
// run is the agent's and live, its lease is renewed to now + p.TTL() with
// the agent's heartbeat (Driver.RunTouch, as one write that writes no
// activity). Unless p.Force, the write is skipped, and the run answered
// as it is, when its last sign of life is less than p.MinRenewInterval
// old (statement RunRecent, on the read side, by the store's clock). It
// answers the run. Errors: those of RunTouchRefusal on the run as read
// next in the same write (CallerRunRead): 422 run_not_found, 403
// run_not_owned, 409 run_not_live.
func (r Runs) RunTouch(ctx context.Context, p *RunTouchParams) (*clasp.Run, error) {
	if !p.Force && p.MinRenewInterval > 0 {
		if run, err := ScanRun(r.d.Read().QueryRow(ctx, "RunRecent", RunTouchArgs(p))); err == nil {
			return run, nil
		} // else renew: no recent sign of life, or the read failed and the write decides
	}
	var out *clasp.Run
	err := writeQuiet(r.d)(ctx, func(q Querier) error {
		run, err := r.d.RunTouch(ctx, q, p)
		if err != nil || run != nil {
			out = run
			return Wrap(err, "renew lease of run %s", p.RunID)
		}
		st, err := CallerRunRead(ctx, r.d, q, p.RunID)
		if err != nil {
			return err
		}
		if err := RunTouchRefusal(p.RunID, p.AgentID, st); err != nil {
			return err
		}
		return fmt.Errorf("renew lease of run %s: refused for no known reason", p.RunID)
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// RunFinish ends run p.RunID with terminal p.Status and, in the same
// transaction, clears every lock naming it with one issue.lock_released
// {runId, runStatus} per issue (rule L6), then writes run.finished and
// promotes the wakes deferred behind the run (releaseRunLocks), in one
// write transaction (Driver.HeartbeatWrite). An
// agent may finish only its own live run; the board any non-terminal run.
// It answers the ended run. Errors: those of ValidateRunFinish, and, when
// the statement matched no row, those of RunRefusal on the run as read
// next (CallerRunRead: a run's state only moves forward, so the read
// explains the refusal).
func (r Runs) RunFinish(ctx context.Context, p *RunFinishParams) (*clasp.Run, error) {
	if err := ValidateRunFinish(p); err != nil {
		return nil, err
	}
	var run *clasp.Run
	err := r.d.HeartbeatWrite(ctx, func(q Querier, x TxDriver) error {
		got, err := ScanRun(q.QueryRow(ctx, "RunFinish", RunFinishArgs(p)))
		if r.d.NoRows(err) {
			run = nil
			return errNotFinished // nothing written
		}
		if err != nil {
			return fmt.Errorf("finish run %s: %w", p.RunID, err)
		}
		run = got
		return releaseRunLocks(ctx, NewHeartbeatTx(q, r.d, x), p.Actor, p.Status, []*clasp.Run{got}, true)
	})
	if !errors.Is(err, errNotFinished) {
		return run, err
	}
	st, err := CallerRunRead(ctx, r.d, r.d.Read(), p.RunID)
	if err != nil {
		return nil, r.d.Translate(err)
	}
	return nil, RunRefusal(p.Actor, p.RunID, st)
}

// errNotFinished ends the write of a RunFinish whose statement matched no
// row.
var errNotFinished = errors.New("finish run: no row matched")

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
