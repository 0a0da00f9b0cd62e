// Package store is the seam between the clasp server and its databases: the
// Store interface, its parameter types, the Actor that every write is
// attributed to, and DB, its one implementation (New). It imports no
// driver; internal/store/sqlite and internal/store/postgres implement
// Driver (driver.go), and internal/store/storetest pins the behaviour
// every store must have (the rules of RULES.md).
//
// Every algorithm is written here once and runs its statements on the
// driver: the settings, companies, issue creation (issues.go), comments,
// reads and lists (CRUD, crud.go), the checkout and release rules (Locks,
// locks.go, over a Driver that runs one try of a rule's statement), a
// run's end and the sweeper (Runs, runs.go), the heartbeat's rules
// (Heartbeat), validation and refusal explanations (lockrules.go). A
// driver runs statements, the named blocks of its sql/*.sql files (which
// also write the lock rules' activity rows), and answers what the
// database said.
//
// Errors: every method returns *clasp.Error values with the codes of the
// JSON error body (RULES.md, Errors and requests) for expected outcomes (not_found, checkout_conflict, ...); any
// other error is an internal failure.
package store

import (
	"cmp"
	"context"
	"strings"
	"time"

	"github.com/clasp-dev/clasp"
)

// Actor is who performs a write. Board actors have Type board and no
// AgentID/RunID; OperatorID is the operator token they act with ("" for
// the tokenless board of --local-trusted). Agent actors carry their AgentID, their CompanyID (the
// tenant scope: an agent never touches another company's rows) and, when
// acting in a run, RunID. System actors are the sweeper and the server.
type Actor struct {
	Type      clasp.ActorType
	AgentID   string
	CompanyID string
	RunID     string
	// OperatorID is the id of the operator token a board actor acts with.
	OperatorID string
	// RequestID is the id of the HTTP request that makes the change,
	// stored on every activity row it writes ("" for none: the sweeper,
	// the scheduler; stored as NULL).
	RequestID string
}

// IsBoard reports whether a is the board.
func (a Actor) IsBoard() bool { return a.Type == clasp.ActorBoard }

// ID returns the actor id written to activity rows: the agent id, the
// operator token's id for the board ("board" when it acts with none) or
// "system".
func (a Actor) ID() string {
	switch a.Type {
	case clasp.ActorAgent:
		return a.AgentID
	case clasp.ActorGate:
		return a.OperatorID
	case clasp.ActorBoard:
		if a.OperatorID != "" {
			return a.OperatorID
		}
		return "board"
	}
	return "system"
}

// Page is a keyset page request. Cursor is opaque (from the previous page's
// NextCursor); Limit is clamped to 1..1000 by the caller (default 100).
type Page struct {
	Limit  int
	Cursor string
}

// CompanyCreateParams creates a company. IssuePrefix is unique across companies.
type CompanyCreateParams struct {
	Name        string
	IssuePrefix string
	// BranchTemplate names the branches of the company's issues;
	// "" is clasp.DefaultBranchTemplate.
	BranchTemplate string
	// EscalateAfterFailures is the company's escalation setting (RULES.md
	// E1); nil takes clasp.DefaultEscalateAfterFailures.
	EscalateAfterFailures *int
	Actor                 Actor
}

// CompanyUpdateParams changes a company: each field set is written, a nil
// one is kept.
type CompanyUpdateParams struct {
	ID                    string
	Name                  *string
	BranchTemplate        *string
	EscalateAfterFailures *int
	Actor                 Actor
}

// CompanyArchiveParams archives company ID (Archive true) or restores it
// from the archive (false).
type CompanyArchiveParams struct {
	ID      string
	Archive bool
	Actor   Actor
}

// AgentCreateParams creates an agent; its NameKey must be unique in CompanyID.
type AgentCreateParams struct {
	CompanyID string
	Name      string
	Role      string
	Actor     Actor
}

// AgentUpdateParams changes an agent. Nil fields are left as they are.
// Terminating an agent is final and, in the same transaction, revokes its
// keys, ends its queued and running runs as cancelled (errorCode
// agent_terminated), releasing their locks, and unassigns its issues that
// are not done or cancelled (rule L6). See Store.AgentUpdate.
type AgentUpdateParams struct {
	AgentID string
	Status  *clasp.AgentStatus
	Name    *string
	Role    *string
	Actor   Actor
}

// AgentKeyCreateParams stores a new API key. The caller generates the secret
// and passes only its hash (hex SHA-256) and a display prefix.
type AgentKeyCreateParams struct {
	AgentID   string
	Prefix    string
	TokenHash string
	Name      string // a label for people; empty stores DefaultKeyName
	Actor     Actor
}

// DefaultKeyName is the name of a key created without one (Paperclip's).
const DefaultKeyName = "default"

// RunOpenParams opens a self-reported run: running, lease = now + LeaseTTL.
// The run token's hash is TokenHashFor(run id) when TokenHashFor is set,
// else TokenHash. With Idempotency, a replay opens nothing and never
// changes the recorded run's token hash (a token once given out stays
// valid for the run's life): the replay's hash, TokenHashFor of the
// recorded run's id, must equal it, so that the caller can answer the same
// token again, see Store.RunOpen.
type RunOpenParams struct {
	AgentID          string
	IssueID          string // optional; a UUID or identifier of the agent's company
	InvocationSource string
	LeaseTTL         time.Duration
	TokenHash        string
	// TokenHashFor, when set, gives the token hash of the run with the
	// given id (a new run's, or a replay's recorded run's); it must be a
	// pure function of the id for the caller, e.g. a token derived from the
	// caller's credential and the run id.
	TokenHashFor func(runID string) string
	// KeyHash is the hash of the agent API key the run is opened with,
	// recorded on the run: revoking that key ends the run
	// (Store.AgentKeyRevoke). "" for none.
	KeyHash string
	// MaxLive, when positive, is the most live runs (queued, or running
	// with an unexpired lease) the agent may have: opening one more is
	// 429 rate_limited (ErrLiveRunsLimit), decided in the same write
	// transaction as the insert, so concurrent opens on any number of
	// replicas never pass it. A replay of an Idempotency-Key is not an
	// open and is not counted.
	MaxLive     int
	Actor       Actor
	Idempotency *IdempotencyParams // optional: the request's Idempotency-Key
}

// TokenHashOf returns the run token hash for run runID: TokenHashFor(runID)
// when TokenHashFor is set, else TokenHash.
func (p *RunOpenParams) TokenHashOf(runID string) string {
	if p.TokenHashFor != nil {
		return p.TokenHashFor(runID)
	}
	return p.TokenHash
}

// ErrRunReplayOtherToken is the error of a replayed RunOpen whose token
// hash is not the recorded run's (another API key of the same agent): 422
// idempotency_key_reused, details.runId; the run's token is left as it is.
func ErrRunReplayOtherToken(runID string) error {
	return clasp.Errorf(clasp.CodeIdempotencyKeyReused,
		"Run %s was opened with this Idempotency-Key under another API key of this agent: replay it with that key, or open a new run with a new key.",
		runID).WithDetails("runId", runID)
}

// RunTouchParams checks that RunID exists (else 422 run_not_found), belongs
// to AgentID (else 403 run_not_owned) and is live (else 409 run_not_live),
// and renews its lease to now + LeaseTTL (RULES.md, Leases: a live run's
// request is a sign of life). When Force is false the store may skip the
// write if the lease was renewed less than MinRenewInterval ago.
type RunTouchParams struct {
	RunID            string
	AgentID          string
	LeaseTTL         time.Duration
	Force            bool
	MinRenewInterval time.Duration
}

// RunFinishParams ends a run (rule L6). Status must be terminal. The run must
// be non-terminal; agents may finish only their live runs (the caller checks
// with RunTouch first); the board may finish any non-terminal run.
type RunFinishParams struct {
	RunID    string
	Status   clasp.RunStatus
	ExitCode *int
	Error    *string
	// ErrorCode is the run's errorCode (e.g. clasp.RunErrorSpawnFailed),
	// set by the system; nil leaves it null.
	ErrorCode *string
	Actor     Actor
}

// RunListParams filters runs of a company, newest first.
type RunListParams struct {
	CompanyID string
	Statuses  []clasp.RunStatus
	AgentID   string
	Page      Page
}

// IssueCreateParams creates an issue; the store assigns the identifier
// PREFIX-N (gapless per company).
type IssueCreateParams struct {
	CompanyID       string
	Title           string
	Description     string
	Status          clasp.IssueStatus // default backlog
	Priority        clasp.Priority    // default medium
	AssigneeAgentID string            // optional; must be an agent of CompanyID
	// ParentID (optional) is the UUID or identifier of an issue of
	// CompanyID this one is a part of.
	ParentID string
	// BlockedByIssueIDs (optional) are the UUIDs or identifiers of issues
	// of CompanyID that must be done before this one enters in_progress or
	// done (RULES.md, Dependencies); duplicates count once.
	BlockedByIssueIDs []string
	Actor             Actor
	Idempotency       *IdempotencyParams // optional: the request's Idempotency-Key
}

// IssueListParams filters issues of a company, newest first.
type IssueListParams struct {
	CompanyID       string
	Statuses        []clasp.IssueStatus
	AssigneeAgentID string
	Unassigned      bool
	Query           string // substring of title or identifier, case-insensitive
	// Ready keeps only issues whose blockers are all done
	// (unresolvedBlockerCount 0).
	Ready bool
	// ParentID (an issue id) keeps only that issue's children.
	ParentID string
	Page     Page
}

// IssueCheckoutParams is a checkout (rules L1-L3). Ref is the issue UUID or
// identifier; an agent actor's CompanyID scopes the lookup (another
// company's issue answers not_found). For an agent, Actor.RunID is the run
// that takes the lock and AgentID must equal Actor.AgentID (the caller
// checks, 403 agent_mismatch). For the board (S12) the issue is assigned to
// AgentID and set in_progress with no lock.
type IssueCheckoutParams struct {
	Ref              string
	AgentID          string
	ExpectedStatuses []clasp.IssueStatus
	LeaseTTL         time.Duration
	Actor            Actor
	// Result, when not nil, is filled on success with how the checkout went
	// (for metrics); it never changes what the store does.
	Result *CheckoutResult
}

// CheckoutResult says how a successful checkout went.
type CheckoutResult struct {
	// SameRun is true when the run already held the issue (rule L2: nothing written).
	SameRun bool
	// AdoptedWhy is "terminal", "lost" or "missing" when the checkout
	// displaced a dead holder (rule L3), "" otherwise.
	AdoptedWhy string
}

// ClaimScope says whose issues a claim may pick: "mine" (assigned to the
// calling agent), "unassigned", or "any" (mine or unassigned, the default).
type ClaimScope string

// The claim scopes.
const (
	ClaimMine       ClaimScope = "mine"
	ClaimUnassigned ClaimScope = "unassigned"
	ClaimAny        ClaimScope = "any"
)

// Valid reports whether s is a known scope.
func (s ClaimScope) Valid() bool { return s == ClaimMine || s == ClaimUnassigned || s == ClaimAny }

// IssueClaimParams is a claim-next: the store picks the most
// urgent issue that run Actor.RunID of agent Actor.AgentID could check out
// under rule L1 (priority rank, then created_at, then id) and checks it out
// for that run in the same statement, with the activity rows of L1/L3.
// Eligible: an issue of the agent's company, within Scope, whose status is
// in ExpectedStatuses (default [todo]) or which is in_progress and the
// agent's (the inbox adoption case), whose lock columns are empty or name
// dead runs; never one the run already holds.
type IssueClaimParams struct {
	ExpectedStatuses []clasp.IssueStatus // default [todo]; closed statuses: 422
	Scope            ClaimScope          // default ClaimAny
	Actor            Actor               // an agent acting in a live run
	// Result, when not nil, is filled on success (AdoptedWhy when a dead
	// holder was displaced, rule L3).
	Result *CheckoutResult
}

// IssueReleaseParams is a release (rule L4).
type IssueReleaseParams struct {
	Ref      string
	Unassign bool
	Actor    Actor
}

// IssueForceReleaseParams is the board's audited force-release.
type IssueForceReleaseParams struct {
	Ref           string
	Reason        string
	ClearAssignee bool
	Actor         Actor
}

// IssueUpdateParams is a PATCH of an issue (rules L5, L6). Nil fields are
// left as they are. AssigneeAgentID set to a pointer to "" unassigns.
// Comment, when set, is written in the same transaction.
//
// Idempotency, when set, makes the PATCH idempotent like a creation (RULES.md,
// Errors and requests; see IdempotencyParams): in the same transaction as the update
// the store looks up (actor, key); a record of the same request answers the
// issue as it is now and writes nothing (no update, comment or activity;
// Replayed set); a record of another request (or kind): 422
// idempotency_key_reused; none: the update is applied and recorded (kind
// "issue_update", the issue's id). So a retry of a PATCH whose first try
// did commit unseen (e.g. its replica died) applies it, and its comment,
// once.
type IssueUpdateParams struct {
	Ref             string
	Title           *string
	Description     *string
	Status          *clasp.IssueStatus
	Priority        *clasp.Priority
	AssigneeAgentID *string
	// ParentID set to a UUID or identifier moves the issue under that
	// issue; set to "" makes it top-level.
	ParentID *string
	// BlockedByIssueIDs, when not nil, replaces the issue's blockers with
	// these (UUIDs or identifiers; empty removes them all), in the same
	// transaction as the rest of the PATCH and before its status change.
	BlockedByIssueIDs *[]string
	Comment           *string
	Actor             Actor
	Idempotency       *IdempotencyParams // optional: the request's Idempotency-Key
}

// CommentCreateParams adds a comment to an issue of the actor's company.
type CommentCreateParams struct {
	Ref         string
	Body        string
	Actor       Actor
	Idempotency *IdempotencyParams // optional: the request's Idempotency-Key
}

// Validate checks p before any write: 400 invalid_request (field body)
// for a body that is empty or only white space.
func (p *CommentCreateParams) Validate() error {
	if strings.TrimSpace(p.Body) == "" {
		return clasp.InvalidField("body", "body is required.")
	}
	return nil
}

// CommentListParams lists comments of an issue, oldest first (newest
// first with Desc). After (a comment id, exclusive) keeps only the
// comments written after it, in either order (Paperclip's after); Cursor
// (a comment id, exclusive) continues a list after that comment in the
// list's own order: the next page.
type CommentListParams struct {
	Ref       string
	CompanyID string // scope for agent actors; empty for the board
	After     string
	Cursor    string
	Desc      bool
	Limit     int
}

// ActivityListParams lists activity, newest first. EntityID narrows to one
// entity; Action to one action.
type ActivityListParams struct {
	CompanyID string
	EntityID  string
	Action    string
	Page      Page
}

// SweepResult counts what one sweeper pass changed.
type SweepResult struct {
	RunsExpired  int // pass 1: running runs whose lease expired, now failed (lease_expired)
	LocksCleared int // pass 2: issues whose locks named only dead runs, now unlocked
	// DependencyWakes (the dependency pass, RULES.md D8): the dependency
	// wakes sent (HeartbeatStore.DependencyWakesDeliver).
	DependencyWakes int
}

// IdempotencyWindow is how long an Idempotency-Key is remembered (RULES.md,
// Errors and requests: a repeat within 24 hours answers the first creation again).
const IdempotencyWindow = 24 * time.Hour

// IdempotencyParams makes a creating call (IssueCreate, CommentCreate,
// RunOpen), or an IssueUpdate, idempotent (RULES.md, Errors and requests), inside the creating transaction
// itself, so that a crash leaves both the resource and its record, or
// neither:
//
//   - The store first looks up (ActorID, Key) among the records of the last
//     IdempotencyWindow. With the same RequestHash (and the same kind of
//     resource) it creates nothing, returns the resource recorded there and
//     sets Replayed. With another RequestHash, or a record of another kind
//     of resource: 422 idempotency_key_reused (details.field
//     "Idempotency-Key").
//   - Otherwise it creates the resource and inserts the record (actor, key,
//     request hash, resource kind and id, time) in the same transaction.
//     The insert is guarded by the unique (actor, key): a concurrent
//     duplicate that committed first makes it fail, and the store retries
//     the whole call, which then replays (the PostgreSQL store; SQLite's
//     single writer serialises them).
//
// A record holds the created resource's id, never a response body: a
// replay re-reads the resource as it is now (an issue may have changed
// since; a run's token is derived again by the caller, see RunOpen), so
// no secret is ever stored. Records older than the window are ignored and replaced, and
// purged from time to time.
type IdempotencyParams struct {
	ActorID     string // whose key it is: the Actor.ID() of the caller
	Key         string // the Idempotency-Key header (1-255 printable ASCII, checked by the caller)
	RequestHash string // hex SHA-256 of the request (method, path and body)
	Replayed    bool   // out: true when the store answered an earlier creation and created nothing
}

// Store is everything the server keeps. Implementations must pass
// storetest.Run. All lock rules (RULES.md, Lock rules) are single conditional
// statements inside the implementation; callers never read, decide and then
// write.
type Store interface {
	// ActivityStream feeds the live event stream.
	ActivityStream

	// Close releases the database.
	Close() error
	// Ping checks that the database answers (for /readyz).
	Ping(ctx context.Context) error

	// SettingGet returns a server setting, or "" and not_found.
	SettingGet(ctx context.Context, key string) (string, error)
	// SettingPutIfAbsent stores value under key unless the key exists; it
	// returns the stored value (the existing one if there was one).
	SettingPutIfAbsent(ctx context.Context, key, value string) (string, error)

	// OperatorTokenCreate stores an operator token (its hash). 400
	// invalid_request, 404 for a missing company, 409 already_exists for
	// a hash stored already.
	OperatorTokenCreate(ctx context.Context, p *OperatorTokenCreateParams) (*clasp.OperatorToken, error)
	// OperatorTokenGet returns an operator token; 404 not_found.
	OperatorTokenGet(ctx context.Context, id string) (*clasp.OperatorToken, error)
	// OperatorTokenFind returns the operator token of a hash, revoked and
	// expired ones included; 404 not_found.
	OperatorTokenFind(ctx context.Context, tokenHash string) (*clasp.OperatorToken, error)
	// OperatorTokenList lists operator tokens (companyID "": all, else
	// those scoped to it), oldest first.
	OperatorTokenList(ctx context.Context, companyID string) ([]*clasp.OperatorToken, error)
	// OperatorTokenRevoke revokes an operator token and ends its board
	// sessions, in one write; a revoked token answers unchanged. 404.
	OperatorTokenRevoke(ctx context.Context, id string, at time.Time) (*clasp.OperatorToken, error)
	// OperatorTokenUsed records a token's use, at most once a minute.
	OperatorTokenUsed(ctx context.Context, id string, at time.Time) error
	// BoardSessionCreate opens a board session; 404 for a missing token.
	BoardSessionCreate(ctx context.Context, p *BoardSessionCreateParams) error
	// BoardSessionFind returns a board session and its token; 404 when
	// there is none.
	BoardSessionFind(ctx context.Context, sessionHash string) (*BoardSession, error)
	// BoardSessionSeen records a session's use, at most once a minute.
	BoardSessionSeen(ctx context.Context, sessionHash string, at time.Time) error
	// BoardSessionDelete ends a board session (nothing if it is gone).
	BoardSessionDelete(ctx context.Context, sessionHash string) error

	// GateTokenCreate stores a gate token (its hash) of a company; see
	// CRUD.GateTokenCreate for the codes.
	GateTokenCreate(ctx context.Context, p *GateTokenCreateParams) (*clasp.GateToken, error)
	// GateTokenFind returns the gate token with this secret hash (revoked
	// ones too); 404.
	GateTokenFind(ctx context.Context, tokenHash string) (*clasp.GateToken, error)
	// GateTokenList lists a company's gate tokens, oldest first.
	GateTokenList(ctx context.Context, companyID string) ([]*clasp.GateToken, error)
	// GateTokenRevoke revokes a gate token of a company; 404.
	GateTokenRevoke(ctx context.Context, companyID, id string, at time.Time) (*clasp.GateToken, error)
	// GateTokenUsed records a gate token's use, at most once a minute.
	GateTokenUsed(ctx context.Context, id string, at time.Time) error
	// GateCheck answers whether commits carrying stamps may be written
	// (RULES.md, The git gate); one read for all of them. 400 beyond
	// GateMaxStamps.
	GateCheck(ctx context.Context, companyID string, stamps []clasp.GateStamp) ([]*clasp.GateVerdict, error)

	// Webhooks: a company's subscriptions, their delivery log and the
	// dispatcher's claims (RULES.md, Webhooks; see the CRUD methods of the
	// same names for the codes).
	WebhookStore

	// CompanyCreate creates a company. 409 already_exists if IssuePrefix is taken.
	CompanyCreate(ctx context.Context, p *CompanyCreateParams) (*clasp.Company, error)
	// CompanyGet returns a company; 404 not_found.
	CompanyGet(ctx context.Context, id string) (*clasp.Company, error)
	// CompanyUpdate changes a company's name, branch template or
	// escalation setting, with a company.updated {changes} activity row
	// when one changed. 400 invalid_request naming the field; 404
	// not_found.
	CompanyUpdate(ctx context.Context, p *CompanyUpdateParams) (*clasp.Company, error)
	// CompanyList returns companies, oldest first, without the archived
	// ones unless includeArchived.
	CompanyList(ctx context.Context, page Page, includeArchived bool) ([]*clasp.Company, string, error)
	// CompanyArchive archives a company (p.Archive) or restores it, with a
	// company.archived or company.unarchived activity row when its state
	// changed; asking for the state it is in changes nothing. 404
	// not_found.
	CompanyArchive(ctx context.Context, p *CompanyArchiveParams) (*clasp.Company, error)

	// AgentCreate creates an active agent. 404 if the company is missing,
	// 409 already_exists if the name key is taken in the company.
	AgentCreate(ctx context.Context, p *AgentCreateParams) (*clasp.Agent, error)
	// AgentGet returns an agent; 404 not_found.
	AgentGet(ctx context.Context, id string) (*clasp.Agent, error)
	// AgentList returns the agents of a company, oldest first.
	AgentList(ctx context.Context, companyID string, page Page) ([]*clasp.Agent, string, error)
	// AgentUpdate changes an agent. Setting status terminated, in the same
	// transaction: revokes its keys, ends its queued and running runs as
	// cancelled with errorCode agent_terminated (one run.finished row
	// each), and clears every lock naming those runs with one
	// issue.lock_released row per issue (rule L6, as RunFinish); then every
	// issue assigned to it that is not done or cancelled loses its
	// assignee and any lock left on it, in_progress becoming todo, with
	// per issue issue.released {previousCheckoutRunId,
	// previousExecutionRunId, unassigned: true, cause: "agent_terminated"}
	// when a lock was cleared, then issue.updated {changes, cause, and
	// locksCleared with the previous holders when a lock was cleared}
	// (rule L6, agent terminated).
	// terminated is final: 422 precondition_failed (details.field status)
	// for a change to any other status. 404 not_found.
	AgentUpdate(ctx context.Context, p *AgentUpdateParams) (*clasp.Agent, error)
	// AgentKeyCreate stores a key hash. 404 if the agent is missing.
	AgentKeyCreate(ctx context.Context, p *AgentKeyCreateParams) (*clasp.APIKey, error)
	// AgentKeyRevoke revokes a key of an agent; 404 if there is no such key.
	// Revoking a revoked key answers the key unchanged. In the same
	// transaction every queued or running run opened with the key
	// (RunOpenParams.KeyHash) ends as cancelled with errorCode key_revoked
	// (one run.finished row each) and every lock naming those runs is
	// cleared (rule L6, as RunFinish): the run tokens they carry stop
	// working with the key, and whoever held the key keeps no lock.
	AgentKeyRevoke(ctx context.Context, agentID, keyID string, actor Actor) (*clasp.APIKey, error)
	// AgentKeyList lists an agent's keys (never the secrets).
	AgentKeyList(ctx context.Context, agentID string) ([]*clasp.APIKey, error)
	// AgentAuthenticate finds the agent owning an unrevoked key with this
	// hash. 401 unauthenticated if there is none or the agent is terminated.
	AgentAuthenticate(ctx context.Context, tokenHash string) (*clasp.Agent, error)
	// AgentAuthenticateRun is AgentAuthenticate (same errors, same record
	// of the key's use) that also looks, in the same read, at run runID
	// ("" for none), the run the request names: it returns that run as it
	// stands when it is the agent's, live, and its last sign of life is
	// less than minRenew old (by the clock liveness is judged by: the
	// database's on PostgreSQL), that is when RunTouch without Force would
	// write nothing and answer the same run. Otherwise the run is nil and
	// the caller checks the run with RunTouch (which also explains a
	// refusal). It saves the HTTP API a round trip per request;
	// it never writes a lease.
	AgentAuthenticateRun(ctx context.Context, tokenHash, runID string, minRenew time.Duration) (*clasp.Agent, *clasp.Run, error)
	// RunAuthenticate finds the live run whose run token has this hash and
	// its agent. 401 unauthenticated if the token is unknown, or the run is
	// not live, or the agent is terminated.
	RunAuthenticate(ctx context.Context, tokenHash string) (*clasp.Agent, *clasp.Run, error)

	// RunOpen opens a running run with a lease. 404 if IssueID names no
	// issue of the agent's company. With p.Idempotency (see
	// IdempotencyParams) a replay opens nothing and keeps the recorded
	// run's token hash: while the run is live and its hash is the replay's
	// (p.TokenHashOf of its id), its lease is renewed, as by a sign of
	// life, and it is returned; with another hash, 422
	// idempotency_key_reused (ErrRunReplayOtherToken); once it is terminal
	// or lost, 409 run_not_live.
	RunOpen(ctx context.Context, p *RunOpenParams) (*clasp.Run, error)
	// RunGet returns a run; 404 not_found.
	RunGet(ctx context.Context, id string) (*clasp.Run, error)
	// RunList lists runs of a company, newest first.
	RunList(ctx context.Context, p *RunListParams) ([]*clasp.Run, string, error)
	// RunTouch validates a run named by an agent and renews its lease (see
	// RunTouchParams for the codes).
	RunTouch(ctx context.Context, p *RunTouchParams) (*clasp.Run, error)
	// RunFinish ends a run and, in the same transaction, clears every lock
	// naming it with one issue.lock_released row per issue (rule L6). 409
	// run_not_live if the run is already terminal.
	RunFinish(ctx context.Context, p *RunFinishParams) (*clasp.Run, error)

	// IssueCreate creates an issue with the next identifier of its company.
	// With p.Idempotency a replay returns the recorded issue as it is now.
	// Its parent and blockers are set in the same transaction (RULES.md
	// D2-D5: 404 not_found for a reference, 422 precondition_failed,
	// dependency_cycle, blocked_by_unresolved).
	IssueCreate(ctx context.Context, p *IssueCreateParams) (*clasp.Issue, error)
	// IssueGet returns an issue by UUID or identifier (case-insensitive).
	// companyID, when not empty, scopes the lookup (404 for other companies).
	IssueGet(ctx context.Context, companyID, ref string) (*clasp.Issue, error)
	// IssueList lists issues of a company, newest first.
	IssueList(ctx context.Context, p *IssueListParams) ([]*clasp.Issue, string, error)
	// IssueInbox lists the issues assigned to agentID with status todo,
	// in_progress or blocked, most urgent first, each with its parent and
	// readiness (unresolvedBlockerIssueIds never null).
	IssueInbox(ctx context.Context, agentID string) ([]*clasp.InboxItem, error)
	// IssueRelations reads the dependency edges of issues issueIDs (ids,
	// not identifiers) of companyID: for each, its blockers, its
	// dependents, the ids of its unresolved blockers and its ancestors,
	// keyed by issue id (an id of no issue of the company has no entry).
	// One read for the whole list; the answer lists are ordered by
	// identifier number, ancestors nearest first.
	IssueRelations(ctx context.Context, companyID string, issueIDs []string) (map[string]*clasp.IssueRelations, error)
	// IssueCheckout applies rules L1-L3. 409 checkout_conflict with the
	// holder in details; 422 precondition_failed if a closed status is expected;
	// 422 blocked_by_unresolved (D1) for an issue with a blocker not done.
	IssueCheckout(ctx context.Context, p *IssueCheckoutParams) (*clasp.Issue, error)
	// IssueClaim checks out the most urgent eligible issue for the calling
	// run (see IssueClaimParams) in one statement; (nil, nil) when none is
	// eligible. 400 invalid_request (scope, expectedStatuses), 422
	// precondition_failed (a closed status expected), 401 run_id_required,
	// 403 forbidden (not an agent) / run_not_owned, 422 run_not_found, 409
	// run_not_live. It never answers checkout_conflict.
	IssueClaim(ctx context.Context, p *IssueClaimParams) (*clasp.Issue, error)
	// IssueRelease applies rule L4. 409 ownership_conflict for non-holders.
	IssueRelease(ctx context.Context, p *IssueReleaseParams) (*clasp.Issue, error)
	// IssueForceRelease clears every lock (board only), audited.
	IssueForceRelease(ctx context.Context, p *IssueForceReleaseParams) (*clasp.Issue, error)
	// IssueUpdate applies a PATCH under rules L5 and L6. With
	// p.Idempotency a replay writes nothing and returns the issue as it is
	// now (see IssueUpdateParams). Its edge changes apply first, in the same
	// transaction (D5); into in_progress or done with a blocker not done is
	// 422 blocked_by_unresolved (D1, D2); a cycle 422 dependency_cycle (D3).
	IssueUpdate(ctx context.Context, p *IssueUpdateParams) (*clasp.Issue, error)

	// CommentCreate adds a comment. With p.Idempotency a replay returns the
	// recorded comment.
	CommentCreate(ctx context.Context, p *CommentCreateParams) (*clasp.Comment, error)
	// CommentList lists comments of an issue, oldest first (newest first
	// with p.Desc). 404 for the issue; 400 invalid_request (field after
	// or cursor) for a comment id that is not of this issue.
	CommentList(ctx context.Context, p *CommentListParams) ([]*clasp.Comment, error)
	// CommentGet returns comment commentID of the issue ref (visible in
	// companyID, "" for any). 404 not_found for the issue, and for a
	// comment that is not of that issue.
	CommentGet(ctx context.Context, companyID, ref, commentID string) (*clasp.Comment, error)

	// ActivityList lists activity rows, newest first.
	ActivityList(ctx context.Context, p *ActivityListParams) ([]*clasp.Activity, string, error)

	// SweepExpiredRuns is sweeper pass 1 (RULES.md, The sweeper): running runs whose
	// lease expired become failed (lease_expired), re-checked in the same
	// statement so a renewal that lands first wins; one run.lost row each.
	SweepExpiredRuns(ctx context.Context) (int, error)
	// SweepStaleLocks is sweeper pass 2: clear the locks of issues whose
	// referenced runs are all dead, compare-and-set on the old values, one
	// issue.stale_lock_cleared row each. Safe to run concurrently.
	SweepStaleLocks(ctx context.Context) (int, error)
}

// WebhookStore is the webhook part of a Store (RULES.md, Webhooks,
// W1-W6); CRUD implements it for both dialects.
type WebhookStore interface {
	WebhookCreate(ctx context.Context, p *WebhookCreateParams) (*clasp.Webhook, error)
	WebhookGet(ctx context.Context, id string) (*clasp.Webhook, error)
	WebhookList(ctx context.Context, companyID string) ([]*clasp.Webhook, error)
	WebhookUpdate(ctx context.Context, p *WebhookUpdateParams) (*clasp.Webhook, error)
	WebhookDelete(ctx context.Context, id string) error
	WebhookDeliveryList(ctx context.Context, webhookID string, page Page) ([]*clasp.WebhookDelivery, string, error)
	WebhookDeliveryGet(ctx context.Context, id string) (*clasp.WebhookDelivery, error)
	WebhookRedeliver(ctx context.Context, id string) (*clasp.WebhookDelivery, error)
	WebhookClaim(ctx context.Context, claim string, limit int, lease time.Duration) ([]*WebhookJob, error)
	WebhookRecord(ctx context.Context, o *WebhookOutcome) error
	WebhookNextDue(ctx context.Context) (time.Duration, bool, error)
	// WebhookAnyEnabled reports whether any subscription is enabled: with
	// none, no write can create a delivery (W1).
	WebhookAnyEnabled(ctx context.Context) (bool, error)
	// AttentionList lists the issues that need a person (RULES.md E5).
	AttentionList(ctx context.Context, companyID string) ([]*clasp.AttentionItem, error)
}

// ActivityStream is what the live event stream (GET
// /api/companies/{companyId}/events) needs of a store: reading
// activity forward from an id, and a wake-up when new rows may exist.
type ActivityStream interface {
	// ActivityAfter returns up to limit (1..1000) activity rows of companyID
	// with id > afterID, oldest first, and the id to resume after next time
	// (through >= afterID). Every row of the company with an id <= through
	// is committed and was returned now or before: a store whose ids can
	// commit out of order (PostgreSQL) stops short of a hole until the hole
	// is known to be a rolled-back insert.
	ActivityAfter(ctx context.Context, companyID string, afterID int64, limit int) (rows []*clasp.Activity, through int64, err error)
	// ActivityLatestID returns the highest activity id of companyID, 0 if it has none.
	ActivityLatestID(ctx context.Context, companyID string) (int64, error)
	// WatchActivity returns a channel that receives a value whenever
	// activity rows may have been committed since the last value (sends are
	// coalesced, never blocking the writer): by this process on SQLite, by
	// any replica on PostgreSQL. The channel is closed when ctx ends.
	WatchActivity(ctx context.Context) <-chan struct{}
}

// Validate checks a PATCH before any store runs it (both stores call it):
// 403 forbidden for an actor that is neither an agent nor the board; 400
// invalid_request naming the field for an empty title or comment or an
// unknown status or priority; 422 precondition_failed for an agent moving
// an issue into in_progress (rule L5: only checkout takes the lock).
func (p *IssueUpdateParams) Validate() error {
	a := p.Actor
	if a.Type != clasp.ActorAgent && !a.IsBoard() {
		return clasp.Errorf(clasp.CodeForbidden, "Only agents and the board update issues.")
	}
	if p.Title != nil && strings.TrimSpace(*p.Title) == "" {
		return clasp.InvalidField("title", "title must not be empty.")
	}
	if p.Status != nil && !p.Status.Valid() {
		return clasp.InvalidField("status", "status %q is not an issue status.", *p.Status)
	}
	if p.Priority != nil && !p.Priority.Valid() {
		return clasp.InvalidField("priority", "priority %q is not a priority.", *p.Priority)
	}
	if p.Comment != nil && strings.TrimSpace(*p.Comment) == "" {
		return clasp.InvalidField("comment", "comment must not be empty.")
	}
	if a.Type == clasp.ActorAgent && p.Status != nil && *p.Status == clasp.IssueInProgress {
		return clasp.Errorf(clasp.CodePreconditionFailed,
			"An agent cannot move an issue into in_progress with an update: check it out, which takes the lock in the same write.").
			WithDetails("field", "status")
	}
	return nil
}

// Normalize trims the title, fills the defaults (status backlog, priority
// medium) and checks an issue creation before any store runs it (both
// stores call it): 400 invalid_request naming the field for an empty title
// or an unknown status or priority; 403 forbidden for an agent creating in
// another company; 422 precondition_failed for an agent creating an issue
// in_progress (rule L5: only checkout takes the lock) or an in_progress
// issue without an assignee.
func (p *IssueCreateParams) Normalize() error {
	p.Title = strings.TrimSpace(p.Title)
	p.Status = cmp.Or(p.Status, clasp.IssueBacklog)
	p.Priority = cmp.Or(p.Priority, clasp.PriorityMedium)
	title, status, priority, a := p.Title, p.Status, p.Priority, p.Actor
	switch {
	case title == "":
		return clasp.InvalidField("title", "title is required.")
	case !status.Valid():
		return clasp.InvalidField("status", "status %q is not an issue status.", status)
	case !priority.Valid():
		return clasp.InvalidField("priority", "priority %q is not a priority.", priority)
	case a.Type == clasp.ActorAgent && a.CompanyID != p.CompanyID:
		return clasp.Errorf(clasp.CodeForbidden, "An agent creates issues only in its own company.")
	case status == clasp.IssueInProgress && a.Type == clasp.ActorAgent:
		return clasp.Errorf(clasp.CodePreconditionFailed,
			"An agent cannot create an issue in_progress: create it, then check it out.").WithDetails("field", "status")
	case status == clasp.IssueInProgress && p.AssigneeAgentID == "":
		return clasp.Errorf(clasp.CodePreconditionFailed, "An issue is in_progress only with an assignee.").
			WithDetails("field", "assigneeAgentId")
	}
	return nil
}
