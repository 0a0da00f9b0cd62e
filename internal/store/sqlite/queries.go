package sqlite

// query names a static statement. Open prepares every one on the writer
// connection, and the SELECTs also on the reader pool, so the hot paths
// never parse SQL. The text of each lives next to the code that runs it.
type query int

const (
	// lock.go: the lock rules and the sweeper
	qLockRead query = iota
	qCallerRunRead
	qCheckout
	qBoardCheckout
	qRelease
	qPatch
	qForceRelease
	qRunFinish
	qReleaseRunLocks
	qSweepExpiredRuns
	qStaleLockCandidates
	qClearStaleLock
	// claim.go: claim-next
	qClaim
	qClaimPick
	qIssueAudit
	// activity.go
	qActivityInsert
	// watch.go
	qActivityAfter
	qActivityLatestID
	// company.go
	qSettingGet
	qSettingInsert
	qCompanyInsert
	qCompanyGet
	// agent.go
	qAgentInsert
	qAgentGet
	qAgentStatusInCompany
	qAgentUpdate
	qAgentRevokeKeys
	qAgentEndRuns
	qAgentHeartbeat
	qKeyInsert
	qKeyRevoke
	qKeyGet
	qKeyList
	qKeyAuth
	qKeyAuthRun
	qKeyUsed
	// run.go
	qRunInsert
	qRunGet
	qRunAuth
	qRunTouch
	qRunReplayOpen
	// issue.go
	qNextIdentifier
	qIssueInsert
	qIssueGet
	qIssueByID
	qInbox
	// comment.go
	qIssueRef
	qCommentInsert
	qCommentList
	qCommentListDesc
	qCommentGet
	qCommentSeq
	qCommentByID
	// idempotency.go
	qIdempotencyGet
	qIdempotencyInsert
	qIdempotencyPurge

	numQueries
)

// queries is the text of every static statement.
var queries = [numQueries]string{
	qLockRead:            sqlLockRead,
	qCallerRunRead:       sqlCallerRunRead,
	qCheckout:            sqlCheckout,
	qBoardCheckout:       sqlBoardCheckout,
	qRelease:             sqlRelease,
	qPatch:               sqlPatch,
	qForceRelease:        sqlForceRelease,
	qRunFinish:           sqlRunFinish,
	qReleaseRunLocks:     sqlReleaseRunLocks,
	qSweepExpiredRuns:    sqlSweepExpiredRuns,
	qStaleLockCandidates: sqlStaleLockCandidates,
	qClearStaleLock:      sqlClearStaleLock,
	qClaim:               sqlClaim,
	qClaimPick:           sqlClaimPick,
	qIssueAudit:          sqlIssueAudit,

	qActivityInsert: sqlActivityInsert,

	qActivityAfter:    sqlActivityAfter,
	qActivityLatestID: sqlActivityLatestID,

	qSettingGet:    sqlSettingGet,
	qSettingInsert: sqlSettingInsert,
	qCompanyInsert: sqlCompanyInsert,
	qCompanyGet:    sqlCompanyGet,

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
