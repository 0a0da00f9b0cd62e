package sqlite

// SQL pieces of the statements still written in Go (heartbeat.go). The
// statements of sql/*.sql are whole and use none of these.
const (
	// sqlLiveCheckout and sqlLiveExecution: the run named by the issue's
	// checkout (execution) lock column is live at :now.
	sqlLiveCheckout = `EXISTS (SELECT 1 FROM runs r WHERE r.id = issues.checkout_run_id
		AND (r.status = 'queued' OR (r.status = 'running' AND r.lease_expires_at > :now)))`
	sqlLiveExecution = `EXISTS (SELECT 1 FROM runs r WHERE r.id = issues.execution_run_id
		AND (r.status = 'queued' OR (r.status = 'running' AND r.lease_expires_at > :now)))`
)
