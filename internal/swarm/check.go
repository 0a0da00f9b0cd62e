package swarm

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"sync"

	"github.com/clasp-dev/clasp"
	"github.com/clasp-dev/clasp/client"
)

// Violation is one broken guarantee found by Check.
type Violation struct {
	Issue  string `json:"issue,omitempty"` // identifier of the issue concerned, if any
	Check  string `json:"check"`           // which check failed, e.g. "result_count"
	Detail string `json:"detail"`
}

// String formats v for the report.
func (v Violation) String() string {
	if v.Issue != "" {
		return fmt.Sprintf("%s: %s: %s", v.Issue, v.Check, v.Detail)
	}
	return fmt.Sprintf("%s: %s", v.Check, v.Detail)
}

// Names of the checks (Violation.Check).
const (
	CheckRead         = "read"          // the API could not be read; nothing else is certain
	CheckMissing      = "missing"       // an expected issue does not exist
	CheckUnexpected   = "unexpected"    // an issue nobody filed exists
	CheckNotDone      = "not_done"      // status is not done
	CheckLockLeft     = "lock_left"     // checkoutRunId or executionRunId still set
	CheckResultCount  = "result_count"  // not exactly one result comment
	CheckWrongHash    = "wrong_hash"    // the result is not the file's SHA-256
	CheckRunLive      = "run_live"      // a run is still queued or running
	CheckDoneCount    = "done_count"    // not exactly one status change to done
	CheckEpoch        = "epoch"         // checkoutEpoch differs from the issue.checked_out rows
	CheckLockActivity = "lock_activity" // a lock change without its activity row, or a row that does not fit
	CheckOwner        = "owner_write"   // done written by a run that did not hold the lock
)

// Tally is what Check counted in the activity log and comments.
type Tally struct {
	Listed            int      `json:"issuesListed"` // issues of the company
	Done              int      `json:"done"`
	CheckedOut        int      `json:"checkedOut"`        // issue.checked_out rows
	Adoptions         int      `json:"adoptions"`         // issue.checkout_lock_adopted rows
	StaleLocksCleared int      `json:"staleLocksCleared"` // issue.stale_lock_cleared rows
	RunsLost          int      `json:"runsLost"`          // run.lost rows
	Released          int      `json:"released"`          // issue.released rows
	LocksReleased     int      `json:"locksReleased"`     // issue.lock_released rows
	ForceReleases     int      `json:"forceReleases"`     // issue.admin_force_release rows
	AcksChecked       int      `json:"acksChecked"`       // writes the agents saw acknowledged, checked against the database
	FilesChanged      []string `json:"filesChanged,omitempty"`
}

// Check reads back, through the API as the board (c), the outcome of a
// swarm in company companyID and returns what it counted and every broken
// guarantee. expected maps each issue's id to the hex SHA-256 of the file
// its description names. It pages through every list. The checks:
//
//   - every expected issue exists, no other does, and each is done;
//   - no issue has a lock left (checkoutRunId, executionRunId empty);
//   - each issue has exactly one result comment ("sha256 <hex>"), and its
//     hash is the expected one (a file that changed on disk since the swarm
//     hashed it is accepted, and listed in Tally.FilesChanged, when the
//     result matches the file as it is now, or says it could not be read
//     and it cannot be read now);
//   - no run of the company is queued or running;
//   - the activity log replays to the final state (rules L1-L7): for each
//     issue, checkoutEpoch equals its issue.checked_out rows and each row's
//     checkoutEpoch counts 1, 2, ...; a checkout that displaces a holder
//     comes with an issue.checkout_lock_adopted naming that holder; every
//     issue.lock_released and issue.stale_lock_cleared names the holder of
//     the moment; the log leaves no lock; the status change to done was
//     written once, by the run holding the lock, the run its result comment
//     carries.
func Check(ctx context.Context, c *client.Client, companyID string, expected map[string]string) (Tally, []Violation) {
	return CheckWithAcks(ctx, c, companyID, expected, nil)
}

// CheckWithAcks is Check plus the check of every write the agents saw
// acknowledged (acks, from their event lines): each must be reflected in
// the database (see checkAcks; violations CheckAck).
func CheckWithAcks(ctx context.Context, c *client.Client, companyID string, expected map[string]string, acks []Ack) (Tally, []Violation) {
	var t Tally
	var vs []Violation
	add := func(issue, check, format string, args ...any) {
		vs = append(vs, Violation{Issue: issue, Check: check, Detail: fmt.Sprintf(format, args...)})
	}

	page, err := c.IssueList(ctx, companyID, client.IssueListParams{Limit: 1000})
	var issues []*clasp.Issue
	if err == nil {
		issues, err = page.All(ctx)
	}
	if err != nil {
		add("", CheckRead, "list issues: %v", err)
		return t, vs
	}
	sort.Slice(issues, func(i, j int) bool { return issues[i].CreatedAt.Before(issues[j].CreatedAt) })
	t.Listed = len(issues)
	byID := map[string]*clasp.Issue{}
	for _, iss := range issues {
		byID[iss.ID] = iss
		if _, ok := expected[iss.ID]; !ok {
			add(iss.Identifier, CheckUnexpected, "issue %q was not filed by the swarm", iss.Title)
		}
		if iss.Status == clasp.IssueDone {
			t.Done++
		} else {
			add(iss.Identifier, CheckNotDone, "status %s, want done", iss.Status)
		}
		if iss.CheckoutRunID != nil || iss.ExecutionRunID != nil {
			add(iss.Identifier, CheckLockLeft, "checkoutRunId %s, executionRunId %s, want both empty", str(iss.CheckoutRunID), str(iss.ExecutionRunID))
		}
	}
	missing := []string{}
	for id := range expected {
		if byID[id] == nil {
			missing = append(missing, id)
		}
	}
	sort.Strings(missing)
	for _, id := range missing {
		add("", CheckMissing, "issue %s was filed but is not listed", id)
	}

	results := checkComments(ctx, c, issues, expected, &t, add)

	rpage, err := c.RunList(ctx, companyID, client.RunListParams{Statuses: []clasp.RunStatus{clasp.RunQueued, clasp.RunRunning}, Limit: 1000})
	var live []*clasp.Run
	if err == nil {
		live, err = rpage.All(ctx)
	}
	if err != nil {
		add("", CheckRead, "list live runs: %v", err)
	}
	for _, r := range live {
		add("", CheckRunLive, "run %s of agent %s is %s", r.ID, r.AgentID, r.Status)
	}

	apage, err := c.CompanyActivity(ctx, companyID, client.ActivityListParams{Limit: 1000})
	var acts []*clasp.Activity
	if err == nil {
		acts, err = apage.All(ctx)
	}
	if err != nil {
		add("", CheckRead, "list activity: %v", err)
		return t, vs
	}
	replayActivity(acts, issues, results, &t, add)
	t.AcksChecked = checkAcks(acks, acts, issues, add)
	sort.SliceStable(vs, func(i, j int) bool { return vs[i].Issue < vs[j].Issue })
	return t, vs
}

// result is what checkComments found on one issue: the run its single
// result comment was written in ("" if none or several, or by the board).
type result struct{ runID string }

// checkComments checks the result comment of every issue, a few issues at a
// time, and returns the result found per issue id.
func checkComments(ctx context.Context, c *client.Client, issues []*clasp.Issue, expected map[string]string, t *Tally, add func(issue, check, format string, args ...any)) map[string]result {
	var (
		mu      sync.Mutex
		wg      sync.WaitGroup
		results = map[string]result{}
		next    = make(chan *clasp.Issue)
	)
	for range 8 {
		wg.Go(func() {
			for iss := range next {
				cs, err := allComments(ctx, c, iss.ID)
				mu.Lock()
				if err != nil {
					add(iss.Identifier, CheckRead, "list comments: %v", err)
					mu.Unlock()
					continue
				}
				mu.Unlock()
				var res []*clasp.Comment
				for _, cm := range cs {
					if strings.HasPrefix(cm.Body, ResultPrefix) {
						res = append(res, cm)
					}
				}
				want, filed := expected[iss.ID]
				changed := false
				var problems []Violation
				switch {
				case len(res) != 1:
					problems = append(problems, Violation{iss.Identifier, CheckResultCount, fmt.Sprintf("%d result comments, want exactly 1", len(res))})
				case !filed:
				case strings.TrimPrefix(res[0].Body, ResultPrefix) != want:
					got := strings.TrimPrefix(res[0].Body, ResultPrefix)
					now, err := HashFile(ctx, iss.Description, 0)
					if (err == nil && now == got) || (err != nil && strings.HasPrefix(got, "error: ")) {
						// The file changed (or vanished) on disk after the
						// swarm hashed it: the input moved, not clasp.
						changed = true
					} else {
						problems = append(problems, Violation{iss.Identifier, CheckWrongHash, fmt.Sprintf("result %q, want sha256 %s of %s", res[0].Body, want, iss.Description)})
					}
				}
				mu.Lock()
				for _, v := range problems {
					add(v.Issue, v.Check, "%s", v.Detail)
				}
				if changed {
					t.FilesChanged = append(t.FilesChanged, iss.Title)
				}
				if len(res) == 1 && res[0].RunID != nil {
					results[iss.ID] = result{runID: *res[0].RunID}
				}
				mu.Unlock()
			}
		})
	}
	for _, iss := range issues {
		next <- iss
	}
	close(next)
	wg.Wait()
	sort.Strings(t.FilesChanged)
	return results
}

// allComments lists every comment of an issue, oldest first.
func allComments(ctx context.Context, c *client.Client, issueID string) ([]*clasp.Comment, error) {
	const limit = 1000
	var all []*clasp.Comment
	after := ""
	for {
		cs, err := c.CommentList(ctx, issueID, client.CommentListParams{After: after, Limit: limit})
		if err != nil {
			return nil, err
		}
		all = append(all, cs...)
		if len(cs) < limit {
			return all, nil
		}
		after = cs[len(cs)-1].ID
	}
}

// lockDetails are the details fields of the lock-changing activity rows.
type lockDetails struct {
	RunID                  string `json:"runId"`
	CheckoutEpoch          *int64 `json:"checkoutEpoch"`
	PreviousCheckoutRunID  string `json:"previousCheckoutRunId"`
	PreviousExecutionRunID string `json:"previousExecutionRunId"`
	ClearedCheckoutRunID   string `json:"clearedCheckoutRunId"`
	ClearedExecutionRunID  string `json:"clearedExecutionRunId"`
	FromRunID              string `json:"fromRunId"` // issue.lock_moved
	ToRunID                string `json:"toRunId"`
}

// replayActivity replays each issue's lock-changing activity rows in order
// and checks that they account for its final state (see Check).
func replayActivity(acts []*clasp.Activity, issues []*clasp.Issue, results map[string]result, t *Tally, add func(issue, check, format string, args ...any)) {
	sort.Slice(acts, func(i, j int) bool { return acts[i].ID < acts[j].ID })
	perIssue := map[string][]*clasp.Activity{}
	recordsStatus := false
	for _, a := range acts {
		switch a.Action {
		case clasp.ActionIssueCheckedOut:
			t.CheckedOut++
		case clasp.ActionIssueLockAdopted:
			t.Adoptions++
		case clasp.ActionIssueStaleLockCleared:
			t.StaleLocksCleared++
		case clasp.ActionRunLost:
			t.RunsLost++
		case clasp.ActionIssueReleased:
			t.Released++
		case clasp.ActionIssueLockReleased:
			t.LocksReleased++
		case clasp.ActionIssueForceRelease:
			t.ForceReleases++
		case clasp.ActionIssueUpdated:
			if _, _, ok := statusChange(a.Details); ok {
				recordsStatus = true
			}
		}
		if a.EntityType == "issue" {
			perIssue[a.EntityID] = append(perIssue[a.EntityID], a)
		}
	}

	for _, iss := range issues {
		rows := perIssue[iss.ID]
		id := iss.Identifier
		// The two lock columns as the log has them: holder is
		// checkoutRunId, exec executionRunId. A checkout sets both; a
		// queued run's wake takes exec alone; a lost run's exec moves to
		// its retry with holder cleared; a run's end clears the columns
		// naming it (rule L6).
		holder, exec := "", ""
		var epochs int64
		dones := 0
		doneRun := ""
		releasedBy, releasedHolder := "", "" // the last issue.released row: its run and the holder it cleared
		for i, a := range rows {
			var d lockDetails
			_ = json.Unmarshal(a.Details, &d)
			run := d.RunID
			if run == "" {
				run = str(a.RunID)
			}
			switch a.Action {
			case clasp.ActionIssueLockAdopted:
				// Checked with the issue.checked_out of the same
				// transaction, just before or after it.
				if pairedRow(rows, i, clasp.ActionIssueCheckedOut, runOf(a)) == nil {
					add(id, CheckLockActivity, "activity %d: %s by run %s without its issue.checked_out", a.ID, a.Action, runOf(a))
				}
			case clasp.ActionIssueCheckedOut:
				epochs++
				if d.CheckoutEpoch != nil && *d.CheckoutEpoch != epochs {
					add(id, CheckEpoch, "activity %d: issue.checked_out with checkoutEpoch %d, want %d (one more than the rows before it)", a.ID, *d.CheckoutEpoch, epochs)
				}
				adopted := pairedRow(rows, i, clasp.ActionIssueLockAdopted, run)
				displaces := (holder != "" && holder != run) || (exec != "" && exec != run)
				switch {
				case holder == run && exec == run:
					add(id, CheckLockActivity, "activity %d: issue.checked_out by run %s that already held the lock (rule L2 writes nothing)", a.ID, run)
				case displaces && adopted == nil:
					add(id, CheckLockActivity, "activity %d: run %s took the lock of run %s without an issue.checkout_lock_adopted row", a.ID, run, cmp.Or(holder, exec))
				case adopted != nil:
					var ad lockDetails
					_ = json.Unmarshal(adopted.Details, &ad)
					if ad.PreviousCheckoutRunID != holder || ad.PreviousExecutionRunID != exec {
						add(id, CheckLockActivity, "activity %d: adoption names previous holders %q/%q, but the log has %q/%q holding the locks",
							adopted.ID, ad.PreviousCheckoutRunID, ad.PreviousExecutionRunID, holder, exec)
					}
				}
				holder, exec = run, run
			case clasp.ActionIssueExecutionLocked:
				// A queued run took the execution lock, clearing a dead
				// checkout lock in the same write.
				if d.PreviousCheckoutRunID != holder || d.PreviousExecutionRunID != exec {
					add(id, CheckLockActivity, "activity %d: %s names previous holders %q/%q, but the log has %q/%q holding the locks",
						a.ID, a.Action, d.PreviousCheckoutRunID, d.PreviousExecutionRunID, holder, exec)
				}
				holder, exec = "", run
			case clasp.ActionIssueLockMoved:
				// A lost run's execution lock moved to its retry, its
				// checkout lock cleared in the same write; the retry
				// checks the issue out anew.
				if d.FromRunID != exec || (holder != "" && holder != d.FromRunID) {
					add(id, CheckLockActivity, "activity %d: %s moves the lock of run %q, but the log has %q/%q holding the locks",
						a.ID, a.Action, d.FromRunID, holder, exec)
				}
				holder, exec = "", d.ToRunID
			case clasp.ActionIssueLockReleased:
				if run == "" || (run != holder && run != exec) {
					add(id, CheckLockActivity, "activity %d: %s names run %q, but the log has %q/%q holding the locks", a.ID, a.Action, run, holder, exec)
					holder, exec = "", ""
				}
				if holder == run {
					holder = ""
				}
				if exec == run {
					exec = ""
				}
			case clasp.ActionIssueStaleLockCleared:
				if d.ClearedCheckoutRunID != holder || (d.ClearedExecutionRunID != "" && d.ClearedExecutionRunID != exec) ||
					(holder == "" && d.ClearedExecutionRunID == "") {
					add(id, CheckLockActivity, "activity %d: %s names runs %q/%q, but the log has %q/%q holding the locks",
						a.ID, a.Action, d.ClearedCheckoutRunID, d.ClearedExecutionRunID, holder, exec)
				}
				holder, exec = "", ""
			case clasp.ActionIssueEscalated:
				// Escalation (RULES.md E3) clears both locks in the
				// transaction of the run's end that escalated it.
				if d.PreviousCheckoutRunID != holder || d.PreviousExecutionRunID != exec {
					add(id, CheckLockActivity, "activity %d: %s names previous holders %q/%q, but the log has %q/%q holding the locks",
						a.ID, a.Action, d.PreviousCheckoutRunID, d.PreviousExecutionRunID, holder, exec)
				}
				holder, exec = "", ""
			case clasp.ActionIssueReleased, clasp.ActionIssueForceRelease:
				if named, ok := previousHolder(a.Details); ok && named != cmp.Or(holder, exec) {
					add(id, CheckLockActivity, "activity %d: %s names previous holder %q, but the log has %q holding the lock", a.ID, a.Action, named, cmp.Or(holder, exec))
				}
				releasedBy, releasedHolder = run, holder
				holder, exec = "", ""
				continue
			case clasp.ActionIssueUpdated:
				from, to, ok := statusChange(a.Details)
				if !ok || from == to {
					continue
				}
				if to == string(clasp.IssueDone) {
					dones++
					doneRun = str(a.RunID)
					// The holder's PATCH may log the release of its own
					// lock (rule L6) just before the update, in the same
					// transaction.
					owner := holder
					if holder == "" && i > 0 && rows[i-1].Action == clasp.ActionIssueReleased && releasedBy == doneRun {
						owner = releasedHolder
					}
					if a.ActorType == clasp.ActorAgent && (doneRun == "" || doneRun != owner) {
						add(id, CheckOwner, "activity %d: run %q set the issue done while the log has %q holding the lock (rule L5)", a.ID, doneRun, owner)
					}
				}
				if from == string(clasp.IssueInProgress) {
					holder, exec = "", "" // rule L6: leaving in_progress clears the locks in the same write
				}
			}
		}
		if holder != "" || exec != "" {
			add(id, CheckLockActivity, "the activity log leaves run %s holding the lock", cmp.Or(holder, exec))
		}
		if epochs != iss.CheckoutEpoch {
			add(id, CheckEpoch, "checkoutEpoch %d, but %d issue.checked_out rows", iss.CheckoutEpoch, epochs)
		}
		if recordsStatus && dones != 1 {
			add(id, CheckDoneCount, "%d status changes to done in the activity log, want exactly 1", dones)
		}
		if r, ok := results[iss.ID]; ok && recordsStatus && dones == 1 && doneRun != "" && r.runID != doneRun {
			add(id, CheckOwner, "result comment written in run %s, status done in run %s", r.runID, doneRun)
		}
	}
}

// previousHolder reads the holder a release row says it cleared; ok is
// false when the row does not say.
func previousHolder(details json.RawMessage) (string, bool) {
	var m map[string]any
	if json.Unmarshal(details, &m) != nil {
		return "", false
	}
	for _, k := range []string{"previousCheckoutRunId", "previousExecutionRunId"} {
		if v, found := m[k]; found {
			s, _ := v.(string)
			if s != "" || k == "previousExecutionRunId" {
				return s, true
			}
		}
	}
	return "", false
}

// runOf is the run an activity row was written in: its runId, else
// details.runId.
func runOf(a *clasp.Activity) string {
	if a.RunID != nil && *a.RunID != "" {
		return *a.RunID
	}
	var d lockDetails
	_ = json.Unmarshal(a.Details, &d)
	return d.RunID
}

// pairedRow returns the row next to rows[i] (just before or after) with the
// given action written by run, or nil: the two rows of one checkout that
// displaced a dead holder (rule L3), in whichever order the store wrote them.
func pairedRow(rows []*clasp.Activity, i int, action, run string) *clasp.Activity {
	for _, j := range []int{i - 1, i + 1} {
		if j >= 0 && j < len(rows) && rows[j].Action == action && runOf(rows[j]) == run {
			return rows[j]
		}
	}
	return nil
}

// statusChange reads a status change from the details of an issue.updated
// row. It understands {"status": b} (from is then ""), {"status": {"from":
// a, "to": b}}, the same under "changes", and {"status": [a, b]}.
func statusChange(details json.RawMessage) (from, to string, ok bool) {
	var m map[string]json.RawMessage
	if json.Unmarshal(details, &m) != nil {
		return "", "", false
	}
	if ch, found := m["changes"]; found {
		var inner map[string]json.RawMessage
		if json.Unmarshal(ch, &inner) == nil {
			m = inner
		}
	}
	raw, found := m["status"]
	if !found {
		return "", "", false
	}
	var plain string
	if json.Unmarshal(raw, &plain) == nil {
		return "", plain, plain != ""
	}
	var ft struct {
		From *string `json:"from"`
		To   *string `json:"to"`
		Old  *string `json:"old"`
		New  *string `json:"new"`
	}
	if json.Unmarshal(raw, &ft) == nil {
		switch {
		case ft.To != nil:
			return str(ft.From), *ft.To, true
		case ft.New != nil:
			return str(ft.Old), *ft.New, true
		}
	}
	var pair []string
	if json.Unmarshal(raw, &pair) == nil && len(pair) == 2 {
		return pair[0], pair[1], true
	}
	return "", "", false
}

func str(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}
