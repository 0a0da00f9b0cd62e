package sqlite

// The statements still written in Go, by name: Open prepares them with
// those of sql/*.sql (sqlite.go), and a name in both is an error. The text
// of each lives next to the code that runs it.

const (
	// statements of sql/*.sql named from run.go and heartbeat.go
	qCallerRunRead = "CallerRunRead"
	qIssueRef      = "IssueRef"
	// agent.go
	qAgentInsert          = "AgentInsert"
	qAgentGet             = "AgentGet"
	qAgentStatusInCompany = "AgentStatusInCompany"
	qAgentUpdate          = "AgentUpdate"
	qAgentRevokeKeys      = "AgentRevokeKeys"
	qAgentEndRuns         = "AgentEndRuns"
	qAgentHeartbeat       = "AgentHeartbeat"
	qKeyInsert            = "KeyInsert"
	qKeyRevoke            = "KeyRevoke"
	qKeyGet               = "KeyGet"
	qKeyList              = "KeyList"
	qKeyAuth              = "KeyAuth"
	qKeyAuthRun           = "KeyAuthRun"
	qKeyUsed              = "KeyUsed"
	// run.go
	qRunInsert     = "RunInsert"
	qRunGet        = "RunGet"
	qRunAuth       = "RunAuth"
	qRunTouch      = "RunTouch"
	qRunReplayOpen = "RunReplayOpen"
)

// queries is the text of every static statement.
var queries = map[string]string{
	qAgentInsert:          sqlAgentInsert,
	qAgentGet:             sqlAgentGet,
	qAgentStatusInCompany: sqlAgentStatusInCompany,
	qAgentUpdate:          sqlAgentUpdate,
	qAgentRevokeKeys:      sqlAgentRevokeKeys,
	qAgentEndRuns:         sqlAgentEndRuns,
	qAgentHeartbeat:       sqlAgentHeartbeat,
	qKeyInsert:            sqlKeyInsert,
	qKeyRevoke:            sqlKeyRevoke,
	qKeyGet:               sqlKeyGet,
	qKeyList:              sqlKeyList,
	qKeyAuth:              sqlKeyAuth,
	qKeyAuthRun:           sqlKeyAuthRun,
	qKeyUsed:              sqlKeyUsed,

	qRunInsert:     sqlRunInsert,
	qRunGet:        sqlRunGet,
	qRunAuth:       sqlRunAuth,
	qRunTouch:      sqlRunTouch,
	qRunReplayOpen: sqlRunReplayOpen,
}
