package sqlite

// The statements still written in Go, by name: Open prepares them with
// those of sql/*.sql (sqlite.go), and a name in both is an error. The text
// of each lives next to the code that runs it.

const (
	// sql/lock.sql, named from run.go
	qCallerRunRead = "CallerRunRead"
	// lock.go: the lock rules and the sweeper
	// claim.go: claim-next
	// activity.go
	// watch.go
	qActivityAfter    = "ActivityAfter"
	qActivityLatestID = "ActivityLatestID"
	// company.go
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
	// issue.go
	qNextIdentifier = "NextIdentifier"
	qIssueInsert    = "IssueInsert"
	qIssueGet       = "IssueGet"
	qIssueByID      = "IssueByID"
	qInbox          = "Inbox"
	// comment.go
	qIssueRef        = "IssueRef"
	qCommentInsert   = "CommentInsert"
	qCommentList     = "CommentList"
	qCommentListDesc = "CommentListDesc"
	qCommentGet      = "CommentGet"
	qCommentSeq      = "CommentSeq"
	qCommentByID     = "CommentByID"
	// idempotency.go
	qIdempotencyGet    = "IdempotencyGet"
	qIdempotencyInsert = "IdempotencyInsert"
	qIdempotencyPurge  = "IdempotencyPurge"
)

// queries is the text of every static statement.
var queries = map[string]string{

	qActivityAfter:    sqlActivityAfter,
	qActivityLatestID: sqlActivityLatestID,

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

	qNextIdentifier: sqlNextIdentifier,
	qIssueInsert:    sqlIssueInsert,
	qIssueGet:       sqlIssueGet,
	qIssueByID:      sqlIssueByID,
	qInbox:          sqlInbox,

	qIssueRef:        sqlIssueRef,
	qCommentInsert:   sqlCommentInsert,
	qCommentList:     sqlCommentList,
	qCommentListDesc: sqlCommentListDesc,
	qCommentGet:      sqlCommentGet,
	qCommentSeq:      sqlCommentSeq,
	qCommentByID:     sqlCommentByID,

	qIdempotencyGet:    sqlIdempotencyGet,
	qIdempotencyInsert: sqlIdempotencyInsert,
	qIdempotencyPurge:  sqlIdempotencyPurge,
}
