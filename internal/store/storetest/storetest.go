// Package storetest is the contract suite every clasp store passes. A
// store's test calls Run with a function that opens a fresh, empty store;
// the suite then pins the rules of RULES.md (lock rules, leases, the
// sweeper, credentials, idempotency, lists) and the scenarios that make
// sense below HTTP, each subtest named after its scenario
// (S01_CheckoutTodo, ...) or lock rule (L5_..., L7_...); RULES.md's last
// table maps each rule to its subtests.
//
// The suite is store-agnostic: it uses only the store.Store interface and
// the Hooks below (raw writes that reach states the API cannot), never SQL.
// It is imported only by store tests.
package storetest

import (
	"context"
	"testing"

	"github.com/clasp-dev/clasp"
	"github.com/clasp-dev/clasp/internal/store"
)

// Hooks reach states the Store API cannot (raw writes), for tests only.
type Hooks interface {
	// DeleteRun deletes the run row, so locks naming it name a missing run
	// (S06 "missing" holder).
	DeleteRun(ctx context.Context, runID string) error
	// ExpireRunLease sets the run's lease_expires_at into the past, leaving
	// its status as it is (a lost run that the sweeper has not seen yet).
	ExpireRunLease(ctx context.Context, runID string) error
	// ForceIssueLocks writes the issue's status, assignee and both lock
	// columns as given (nil clears), with no activity row and no checks
	// (S07, S22).
	ForceIssueLocks(ctx context.Context, issueID string, status clasp.IssueStatus, assigneeAgentID, checkoutRunID, executionRunID *string) error
	// SetRunStatus changes the run's status only: no lock is released.
	SetRunStatus(ctx context.Context, runID string, status clasp.RunStatus) error
	// HoldCheckouts occupies the store's in-process queue of the checkouts
	// of issue reference ref (as a checkout names it) in companyID, as a
	// checkout in flight does (store.Inflight): agents' checkouts of that
	// reference then wait. waiting reports how many calls wait in the
	// store's queues now; release lets them go, as the end of a checkout
	// does.
	HoldCheckouts(ctx context.Context, companyID, ref string) (waiting func() int, release func(), err error)
}

// opener opens a fresh, empty store and its hooks; the store is closed by
// the opener's own t.Cleanup.
type opener = func(t *testing.T) (store.Store, Hooks)

// Run runs every contract test against stores made by open; each call of
// open returns a fresh, empty store. Most subtests run in parallel; S21,
// whose leases are real 300 ms ones, runs alone first so that no other
// subtest starves its renewals.
func Run(t *testing.T, open func(t *testing.T) (store.Store, Hooks)) {
	serial := []struct {
		name string
		fn   func(*testing.T, opener)
	}{
		{"S21_RenewedRunNeverSwept", testS21RenewedRunNeverSwept},
	}
	for _, tc := range serial {
		t.Run(tc.name, func(t *testing.T) { tc.fn(t, open) })
	}

	parallel := []struct {
		name string
		fn   func(*testing.T, opener)
	}{
		// Checkout (scenarios S01-S12, rules L1-L3).
		{"S01_CheckoutTodo", testS01CheckoutTodo},
		{"S02_SameRunRetry", testS02SameRunRetry},
		{"S03_TwoRunsSameAgentRace", testS03TwoRunsSameAgentRace},
		{"S04_ManyAgentsRace", testS04ManyAgentsRace},
		{"S05_HeldByLiveRun", testS05HeldByLiveRun},
		{"S06_AdoptDeadHolder", testS06AdoptDeadHolder},
		{"S07_DeadExecutionLock", testS07DeadExecutionLock},
		{"S08_InProgressUnlocked", testS08InProgressUnlocked},
		{"S09_AssignedToOtherAgent", testS09AssignedToOtherAgent},
		{"S10_ClosedStatuses", testS10ClosedStatuses},
		{"S11_RunTouchCodes", testS11RunTouchCodes},
		{"S12_BoardCheckout", testS12BoardCheckout},
		{"L1_CallerRunMustBeLive", testL1CallerRunMustBeLive},
		{"L1_CheckoutBatch", testL1CheckoutBatch},
		{"L1_CheckoutWaitersDecideAfterRelease", testL1CheckoutWaitersDecideAfterRelease},
		// Release and writes (S13-S18, rules L4-L6).
		{"S13_Release", testS13Release},
		{"S14_ReleaseDeadHolder", testS14ReleaseDeadHolder},
		{"S15_ReleaseByOtherAgent", testS15ReleaseByOtherAgent},
		{"S16_BoardPatchReleases", testS16BoardPatchReleases},
		{"S17_ForceRelease", testS17ForceRelease},
		{"L5_AgentPatchIntoInProgress", testL5AgentPatchIntoInProgress},
		{"L5_BoardPatchIntoInProgress", testL5BoardPatchIntoInProgress},
		{"L5_HolderPatchKeepsLock", testL5HolderPatchKeepsLock},
		{"L5_DeadHolderPatch", testL5DeadHolderPatch},
		{"L6_HolderPatchLeavesInProgress", testL6HolderPatchLeavesInProgress},
		// Runs, leases, sweeper (S19-S24, RULES.md, Leases and The sweeper).
		{"S19_FinishReleasesLocks", testS19FinishReleasesLocks},
		{"L6_RunFinishedDetails", testL6RunFinishedDetails},
		{"L6_RunFinishDuringCheckout", testL6RunFinishDuringCheckout},
		{"S20_SweepExpiredLease", testS20SweepExpiredLease},
		{"S20_LeaseExpiresBetweenPasses", testS20LeaseExpiresBetweenPasses},
		{"S22_SweepLeavesLiveHolders", testS22SweepLeavesLiveHolders},
		{"S23_ConcurrentSweepers", testS23ConcurrentSweepers},
		{"S24_AdoptLostHolderBeforeSweep", testS24AdoptLostHolderBeforeSweep},
		// Tenancy and identifiers (S25, S27).
		{"S25_OtherCompanyNotFound", testS25OtherCompanyNotFound},
		{"S27_ConcurrentIdentifiers", testS27ConcurrentIdentifiers},
		// Other contract points.
		{"Fencing_EpochSequence", testFencingEpochSequence},
		{"G2_CompletedEpoch", testGateCompletedEpoch},
		{"G1_GateCheck", testGateCheck},
		{"G4_GateTokens", testGateTokens},
		{"G5_BranchTemplate", testBranchTemplate},
		{"Company_PrefixUnique", testCompanyPrefixUnique},
		{"Agent_NameKeyUnique", testAgentNameKeyUnique},
		{"AgentKey_AuthenticateRevokeTerminate", testAgentKeys},
		{"AgentKey_RevokeEndsItsRuns", testKeyRevokeEndsItsRuns},
		{"Run_LiveLimit", testRunLiveLimit},
		{"Run_TokenAuthenticate", testRunAuthenticate},
		{"AgentKey_AuthenticateWithRun", testAgentAuthenticateRun},
		{"Run_List", testRunList},
		{"Issue_Pagination", testIssuePagination},
		{"Issue_ListFilters", testIssueListFilters},
		{"Issue_ListQueryFoldsUnicode", testIssueListQueryFold},
		{"Issue_GetByIdentifier", testIssueGetByIdentifier},
		{"Inbox", testInbox},
		{"Comments", testComments},
		{"Activity_ListNewestFirst", testActivityList},
		{"Activity_StreamForward", testActivityStream},
		{"Activity_IssueUpdatedChanges", testIssueUpdatedChanges},
		{"Idempotency_ReplayCreatesNothing", testIdempotencyReplayCreatesNothing},
		{"Idempotency_ConcurrentDuplicatesCreateOnce", testIdempotencyConcurrentDuplicates},
		{"Idempotency_ConcurrentCommentsCreateOnce", testIdempotencyConcurrentComments},
		{"Idempotency_RunReplayKeepsToken", testIdempotencyRunReplayKeepsToken},
		{"Idempotency_PatchReplayWritesOnce", testIdempotencyPatchReplayWritesOnce},
		{"Agent_TerminateEndsRunsAndReleasesLocks", testAgentTerminateEndsRunsAndLocks},
		{"Agent_TerminatedIsFinal", testAgentTerminatedIsFinal},
		{"Agent_TerminateUnassignsOpenIssues", testAgentTerminateUnassignsOpenIssues},
		{"Settings", testSettings},
		{"Operator_Tokens", testOperatorTokens},
		{"Operator_BoardSessions", testBoardSessions},
		// Claim-next, rules L1-L3 on the most urgent eligible issue.
		{"Claim_PriorityThenAge", testClaimPriorityThenAge},
		{"Claim_Scopes", testClaimScopes},
		{"Claim_AdoptsDeadHolder", testClaimAdoptsDeadHolder},
		{"Claim_ManyClaimersOncePerIssue", testClaimManyClaimers},
		// Random sequences from several goroutines, invariant L7 after each.
		{"Property_L7", testPropertyL7},
	}
	parallel = append(parallel, depTests...)     // RULES.md, Dependencies (deps.go)
	parallel = append(parallel, webhookTests...) // RULES.md, Webhooks (webhook.go)
	parallel = append(parallel, escalationTests...)
	for _, tc := range parallel {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tc.fn(t, open)
		})
	}
}
