package sqlite

// Names of statements of sql/*.sql that Go code of another area runs.
const (
	qCallerRunRead = "CallerRunRead" // sql/lock.sql, named from run.go
	qIssueRef      = "IssueRef"      // sql/comment.sql, named from run.go and heartbeat.go
)
