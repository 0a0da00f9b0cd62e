package postgres

import (
	"context"
	"fmt"
	"time"
)

// Raw runs the statements of an uncontended checkout and release straight
// through pgx: statements Checkout and Release, each one statement (the
// conditional UPDATE and its activity INSERT in one CTE) in its own
// implicit transaction, with the store's arguments, its answer scanned
// into plain variables; none of the store's Go code around them. It is
// the raw limit `clasp bench --database-url` compares the server with,
// on a store of its own, like BenchmarkRawPgx. For benchmarks
// only.
type Raw struct{ s *Store }

// Raw returns the raw-limit runner of s.
func (s *Store) Raw() *Raw { return &Raw{s: s} }

// RawStep names one issue, the agent and its run, in company CompanyID.
type RawStep struct {
	IssueID, AgentID, RunID, CompanyID string
}

// Checkout runs statement Checkout for p (expected status todo) and fails if it
// changed nothing.
func (r *Raw) Checkout(ctx context.Context, p RawStep) error {
	return r.step(ctx, "checkout", "Checkout", p)
}

// Release runs statement Release for p (the assignee stays) and fails if it
// changed nothing.
func (r *Raw) Release(ctx context.Context, p RawStep) error {
	return r.step(ctx, "release", "Release", p)
}

func (r *Raw) step(ctx context.Context, what, name string, p RawStep) error {
	args := namedArgs{"rid": p.IssueID, "rident": "", "company": p.CompanyID, "run": p.RunID, "agent": p.AgentID, "board": false,
		"actor_type": "agent", "actor_id": p.AgentID, "actor_run": p.RunID, "expected": []string{"todo"}, "unassign": false}
	var (
		changed, ok, runEnded                  bool
		owned, active, inCompany               *bool
		t1, t2, t3, t4, t5, t6, t7, status     string
		n1, n2, n3, n4, o1, o2, o3, o4, o5, o6 *string
		o7, o8                                 *string
		epoch                                  int64
		ts1, ts2, ts3, ts4                     *time.Time
		created, updated                       time.Time
	)
	err := r.s.pool.QueryRow(ctx, q(name), args).Scan(&changed, &t1, &t2, &t3, &t4, &t5, &t6, &t7, &n1, &n2, &epoch, &n3, &n4,
		&ts1, &ts2, &ts3, &ts4, &created, &updated,
		&status, &o1, &o2, &o3, &o4, &o5, &o6, &o7, &o8, &owned, &active, &inCompany, &ok, &runEnded)
	if err != nil {
		return fmt.Errorf("raw %s of issue %s: %w", what, p.IssueID, err)
	}
	if !changed {
		return fmt.Errorf("raw %s of issue %s: nothing changed", what, p.IssueID)
	}
	return nil
}
