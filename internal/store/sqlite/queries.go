package sqlite

// Names of statements of sql/*.sql that Go code of another area runs.
const (
	qCallerRunRead = "CallerRunRead" // sql/lock.sql, named from package store (CallerRunRead)
	qIssueRef      = "IssueRef"      // sql/comment.sql, named from heartbeat.go
)
