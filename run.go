package clasp

import "time"

// RunStatus is the status of a run.
type RunStatus string

// Run statuses. The last four are terminal: a terminal run
// never changes again.
const (
	RunQueued    RunStatus = "queued"
	RunRunning   RunStatus = "running"
	RunSucceeded RunStatus = "succeeded"
	RunFailed    RunStatus = "failed"
	RunCancelled RunStatus = "cancelled"
	RunTimedOut  RunStatus = "timed_out"
)

// Valid reports whether s is a known run status.
func (s RunStatus) Valid() bool {
	switch s {
	case RunQueued, RunRunning, RunSucceeded, RunFailed, RunCancelled, RunTimedOut:
		return true
	}
	return false
}

// Terminal reports whether s is one of succeeded, failed, cancelled, timed_out.
func (s RunStatus) Terminal() bool {
	switch s {
	case RunSucceeded, RunFailed, RunCancelled, RunTimedOut:
		return true
	}
	return false
}

// Error codes a lost run is failed with, and the one a
// run is cancelled with when its agent is terminated.
const (
	RunErrorLeaseExpired    = "lease_expired"
	RunErrorProcessLost     = "process_lost"
	RunErrorSpawnFailed     = "spawn_failed" // the scheduler could not start the run's process
	RunErrorAgentTerminated = "agent_terminated"
)

// Invocation sources of a run.
const (
	InvocationSelf = "self" // opened by the agent itself (POST /agents/me/runs)
)

// Run is one execution session of an agent. A running run
// holds a lease that every sign of life renews; a run is live when queued, or
// running with an unexpired lease.
type Run struct {
	ID               string     `json:"id"`
	CompanyID        string     `json:"companyId"`
	AgentID          string     `json:"agentId"`
	Status           RunStatus  `json:"status"`
	InvocationSource string     `json:"invocationSource"`
	IssueID          *string    `json:"issueId"`
	RetryOfRunID     *string    `json:"retryOfRunId"`
	Attempt          int        `json:"attempt"`
	PID              *int       `json:"pid"`
	HostID           *string    `json:"hostId"`
	LeaseExpiresAt   *time.Time `json:"leaseExpiresAt"`
	LastSignOfLifeAt *time.Time `json:"lastSignOfLifeAt"`
	StartedAt        *time.Time `json:"startedAt"`
	FinishedAt       *time.Time `json:"finishedAt"`
	ExitCode         *int       `json:"exitCode"`
	ErrorCode        *string    `json:"errorCode"`
	Error            *string    `json:"error"`
	CreatedAt        time.Time  `json:"createdAt"`
	// RunToken is a credential bound to this run alone (RULES.md, Actors and credentials),
	// set only in the answer that opens the run.
	RunToken string `json:"runToken,omitempty"`
}

// Live reports whether r is queued, or running with a lease that has not
// expired at now.
func (r *Run) Live(now time.Time) bool {
	switch r.Status {
	case RunQueued:
		return true
	case RunRunning:
		return r.LeaseExpiresAt != nil && r.LeaseExpiresAt.After(now)
	}
	return false
}
