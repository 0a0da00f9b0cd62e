package swarm

import (
	"encoding/json"
	"sort"
	"strconv"

	"github.com/clasp-dev/clasp"
)

// CheckAck is the check of acknowledged writes (Violation.Check): a write
// an agent saw answered 200 that the database does not reflect.
const CheckAck = "ack_lost"

// Ack is a write an agent process saw acknowledged, read from its event
// lines: a checkout (EventCheckedOut, answered 200 with Epoch) or the PATCH
// that set the issue done with its result (EventDone, in the run that held
// the lock at Epoch).
type Ack struct {
	Op    string `json:"op"`    // EventCheckedOut or EventDone
	Issue string `json:"issue"` // identifier
	Run   string `json:"run"`
	Epoch int64  `json:"epoch"`
}

// ackFromEvent returns the Ack an event line records; ok is false for
// other events.
func ackFromEvent(ev Event) (Ack, bool) {
	if ev.Name != EventCheckedOut && ev.Name != EventDone {
		return Ack{}, false
	}
	a := Ack{Op: ev.Name, Issue: ev.Fields["issue"], Run: ev.Fields["run"]}
	e, err := strconv.ParseInt(ev.Fields["epoch"], 10, 64)
	if err != nil && ev.Name == EventCheckedOut {
		return Ack{}, false
	}
	a.Epoch = e
	return a, a.Issue != "" && a.Run != ""
}

// checkAcks checks every acknowledged write against the final state and
// the activity log (rows of the company, any order):
//
//   - a checkout by run R at epoch E: the issue has an issue.checked_out
//     row of R with checkoutEpoch E, and its checkoutEpoch is at least E;
//   - done by run R (at epoch E): the issue is done, an issue.updated row
//     set it done in run R (the one such row, when the log records status
//     changes), and R's checkout at E is in the log.
//
// It returns how many acks it checked.
func checkAcks(acks []Ack, acts []*clasp.Activity, issues []*clasp.Issue, add func(issue, check, format string, args ...any)) int {
	byIdent := map[string]*clasp.Issue{}
	for _, iss := range issues {
		byIdent[iss.Identifier] = iss
	}
	type outKey struct {
		issue, run string
		epoch      int64
	}
	outs := map[outKey]bool{}
	doneBy := map[string][]string{} // issue id -> runs of the issue.updated rows to done
	sorted := append([]*clasp.Activity(nil), acts...)
	sort.Slice(sorted, func(i, j int) bool { return sorted[i].ID < sorted[j].ID })
	for _, a := range sorted {
		switch a.Action {
		case clasp.ActionIssueCheckedOut:
			var d lockDetails
			if err := json.Unmarshal(a.Details, &d); err == nil && d.CheckoutEpoch != nil {
				outs[outKey{a.EntityID, runOf(a), *d.CheckoutEpoch}] = true
			}
		case clasp.ActionIssueUpdated:
			if _, to, ok := statusChange(a.Details); ok && to == string(clasp.IssueDone) {
				doneBy[a.EntityID] = append(doneBy[a.EntityID], str(a.RunID))
			}
		}
	}
	for _, k := range acks {
		iss := byIdent[k.Issue]
		if iss == nil {
			add(k.Issue, CheckAck, "an agent saw %s acknowledged in run %s, but the issue is not listed", k.Op, k.Run)
			continue
		}
		switch k.Op {
		case EventCheckedOut:
			if !outs[outKey{iss.ID, k.Run, k.Epoch}] {
				add(k.Issue, CheckAck, "run %s saw its checkout answered 200 with epoch %d, but no issue.checked_out row of that run has that epoch", k.Run, k.Epoch)
			}
			if iss.CheckoutEpoch < k.Epoch {
				add(k.Issue, CheckAck, "run %s saw its checkout answered 200 with epoch %d, but checkoutEpoch is %d", k.Run, k.Epoch, iss.CheckoutEpoch)
			}
		case EventDone:
			if iss.Status != clasp.IssueDone {
				add(k.Issue, CheckAck, "run %s saw its result and status done acknowledged, but the status is %s", k.Run, iss.Status)
			}
			if runs := doneBy[iss.ID]; len(runs) > 0 && !contains(runs, k.Run) {
				add(k.Issue, CheckAck, "run %s saw its PATCH to done acknowledged, but the log has the issue set done in run(s) %v", k.Run, runs)
			}
			if k.Epoch > 0 && !outs[outKey{iss.ID, k.Run, k.Epoch}] {
				add(k.Issue, CheckAck, "run %s set the issue done holding it at epoch %d, but no issue.checked_out row of that run has that epoch", k.Run, k.Epoch)
			}
		default:
			add(k.Issue, CheckAck, "unknown acknowledged operation %q", k.Op)
		}
	}
	return len(acks)
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
