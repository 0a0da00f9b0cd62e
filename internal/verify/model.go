// Package verify is `clasp verify`: concurrent clients run
// random lock operations over HTTP against a small set of issues, every
// call and return is recorded, and the history is checked for
// linearizability against a sequential model of one issue's lock with
// porcupine, partitioned per issue.
package verify

import (
	"fmt"
	"sort"
	"strings"

	"github.com/anishathalye/porcupine"
)

// Op kinds.
const (
	OpOpen      = "open"      // POST /api/agents/me/runs (not part of the model)
	OpCheckout  = "checkout"  // POST /api/issues/{id}/checkout, expectedStatuses [todo]
	OpRelease   = "release"   // POST /api/issues/{id}/release
	OpRead      = "read"      // GET /api/issues/{id}
	OpFinish    = "finish"    // POST /api/runs/{id}/finish
	OpHeartbeat = "heartbeat" // POST /api/runs/{id}/heartbeat
	// With dependencies (Config.Deps) every contended issue is blocked by
	// an issue of its own, which the clients resolve and reopen: Input.Issue
	// is then the contended (dependent) issue, whose partition the
	// operation belongs to.
	OpResolve = "resolve" // PATCH /api/issues/{blocker} {status: done}
	OpReopen  = "reopen"  // PATCH /api/issues/{blocker} {status: todo}
)

// Input is one operation's call.
type Input struct {
	Kind     string `json:"kind"`
	Issue    string `json:"issue,omitempty"` // issue id (checkout, release, read)
	Run      string `json:"run,omitempty"`   // the run acting (or finished, heartbeated)
	Agent    string `json:"agent,omitempty"` // the run's agent
	Unassign bool   `json:"unassign,omitempty"`
	// Done is set by partition on the acting run's last operation in a
	// partition when every other operation of that run there returned
	// before this one's call: it is then linearized after all of them,
	// and the model may forget the run once it is not the holder (see
	// state.holderDone).
	Done bool `json:"done,omitempty"`
}

// Output is one operation's result. Unknown: no answer (timeout,
// connection error, 5xx), the operation may or may not have taken effect.
// OK: a 2xx answer; Code: the error code of any other answer. For answers
// carrying an issue, its lock fields.
type Output struct {
	Unknown  bool   `json:"unknown,omitempty"`
	OK       bool   `json:"ok"`
	Status   int    `json:"httpStatus,omitempty"`
	Code     string `json:"code,omitempty"`
	Issue    *Lock  `json:"issue,omitempty"`
	RunID    string `json:"runId,omitempty"` // open: the run opened
	Note     string `json:"note,omitempty"`
	Returned bool   `json:"-"`
	notSent  bool   // the connection was refused: the request never left
	reset    bool   // no answer: the connection was reset or closed (EOF)
	cut      bool   // a 503 of the server's request deadline (details.deadlineExceeded): not over at the answer
}

// Lock is the part of an issue the model tracks. L7 is false when the
// answer broke invariant L7 (checkoutRunId set without status in_progress
// and executionRunId = checkoutRunId). Ready is the issue's
// dependencyReady negated: Blocked is true while its blocker is not done
// (false for an issue without one).
type Lock struct {
	Status   string `json:"status"`
	Assignee string `json:"assignee,omitempty"`
	Holder   string `json:"holder,omitempty"` // checkoutRunId
	Epoch    int64  `json:"epoch"`
	L7       bool   `json:"l7"`
	Blocked  bool   `json:"blocked,omitempty"`
}

// state is the model's state of one issue: its lock and the runs known to
// have finished (dead holders, refused callers). Values are never mutated
// after creation.
//
// finished only holds runs that still matter: a run whose last operation
// in the partition was stepped (Input.Done) is dropped from it as soon as
// it is not the holder, because no later operation names it (as caller)
// and the lock does not name it (as holder), so whether it died cannot
// change any later step: states differing only there behave alike, and
// merging them keeps the check exact while the set and each comparison
// stay small (without it both grow with every run of the history and the
// check turns quadratic). holderDone records that the holder is such a
// run, to drop it when the lock moves on.
type state struct {
	lock       Lock
	finished   map[string]bool
	holderDone bool
}

func (s state) withFinished(run string) state {
	f := make(map[string]bool, len(s.finished)+1)
	for k := range s.finished {
		f[k] = true
	}
	f[run] = true
	return state{lock: s.lock, finished: f, holderDone: s.holderDone}
}

func (s state) without(run string) state {
	if !s.finished[run] {
		return s
	}
	f := make(map[string]bool, len(s.finished))
	for k := range s.finished {
		if k != run {
			f[k] = true
		}
	}
	return state{lock: s.lock, finished: f, holderDone: s.holderDone}
}

// settle forgets runs that no longer matter (see state) after prev became
// n through an operation in: the previous holder when it was done and the
// lock moved on, and the acting run after its last operation unless it
// now holds the lock.
func settle(prev, n state, in Input) state {
	if prev.lock.Holder != n.lock.Holder {
		if prev.holderDone {
			n = n.without(prev.lock.Holder)
		}
		n.holderDone = false
	}
	if in.Done && in.Run != "" {
		if n.lock.Holder == in.Run {
			n.holderDone = true
		} else {
			n = n.without(in.Run)
		}
	}
	return n
}

func stateEqual(a, b any) bool {
	x, y := a.(state), b.(state)
	if x.lock != y.lock || x.holderDone != y.holderDone || len(x.finished) != len(y.finished) {
		return false
	}
	for k := range x.finished {
		if !y.finished[k] {
			return false
		}
	}
	return true
}

// step applies one operation with a known outcome to s (the lock
// rules L1-L6 of RULES.md, for one issue) and reports whether out is an answer the
// rules allow, and the next state.
func step(s state, in Input, out Output) (bool, state) {
	live := !s.finished[in.Run]
	l := s.lock
	switch in.Kind {
	case OpRead:
		return out.OK && out.Issue != nil && *out.Issue == Lock{Status: l.Status, Assignee: l.Assignee, Holder: l.Holder, Epoch: l.Epoch, L7: true, Blocked: l.Blocked}, s
	case OpResolve, OpReopen:
		// The blocker is unlocked and of the same company: any live run
		// of the company may set its status (L5); the dependent's
		// readiness follows in the same transaction (D rules).
		if !live {
			return !out.OK && out.Code == "run_not_live", s
		}
		if !out.OK {
			return false, s
		}
		n := s
		n.lock.Blocked = in.Kind == OpReopen
		return true, n
	case OpHeartbeat:
		if !live {
			return !out.OK && out.Code == "run_not_live", s
		}
		return out.OK, s
	case OpFinish:
		if !live {
			return !out.OK && out.Code == "run_not_live", s
		}
		if !out.OK {
			return false, s
		}
		n := s.withFinished(in.Run)
		if n.lock.Holder == in.Run {
			n.lock.Holder = "" // L6: the lock naming the run is cleared, status and assignee stay
		}
		return true, n
	case OpCheckout:
		if !live {
			return !out.OK && out.Code == "run_not_live", s
		}
		free := l.Holder == "" || l.Holder == in.Run || s.finished[l.Holder]
		mine := l.Assignee == "" || l.Assignee == in.Agent
		statusOK := l.Status == "todo" || (l.Status == "in_progress" && l.Assignee == in.Agent)
		if !(free && mine && statusOK) {
			return !out.OK && out.Code == "checkout_conflict", s
		}
		if l.Status != "in_progress" && l.Blocked {
			// Entering in_progress while the blocker is not done: refused
			// on the rows as they are at that commit.
			return !out.OK && out.Code == "blocked_by_unresolved", s
		}
		n := l
		n.Status, n.Assignee, n.Holder, n.L7 = "in_progress", in.Agent, in.Run, true
		if l.Holder != in.Run {
			n.Epoch++
		}
		if !out.OK || out.Issue == nil || *out.Issue != n {
			return false, s
		}
		n.L7 = false // the state keeps L7 false; reads compare with true
		return true, state{lock: n, finished: s.finished, holderDone: s.holderDone}
	case OpRelease:
		if !live {
			return !out.OK && out.Code == "run_not_live", s
		}
		if l.Holder == "" {
			// L4: releasing an issue with no lock is a no-op, for its
			// assignee or when unassigned; another agent gets 409.
			if l.Assignee != "" && l.Assignee != in.Agent {
				return !out.OK && out.Code == "ownership_conflict", s
			}
			want := l
			want.L7 = true
			return out.OK && out.Issue != nil && *out.Issue == want, s
		}
		if !(l.Holder == in.Run || (s.finished[l.Holder] && l.Assignee == in.Agent)) {
			return !out.OK && out.Code == "ownership_conflict", s
		}
		n := l
		n.Holder = ""
		if n.Status == "in_progress" {
			n.Status = "todo"
		}
		if in.Unassign {
			n.Assignee = ""
		}
		want := n
		want.L7 = true
		if !out.OK || out.Issue == nil || *out.Issue != want {
			return false, s
		}
		return true, state{lock: n, finished: s.finished, holderDone: s.holderDone}
	}
	return false, s
}

// Model returns the porcupine model of one issue's lock, partitioned per
// issue: each partition holds the issue's checkouts, releases and reads,
// plus the finishes and heartbeats of the runs acting on it (they decide
// which holders are dead and which callers are refused). Runs may also
// die without an operation, their lease running out (mayHaveDied). An operation with an unknown outcome may
// have taken effect or not: the model tries both.
// Every issue starts todo, unassigned, unlocked, at epoch 0 (Run creates
// them so).
func Model() porcupine.Model {
	nm := porcupine.NondeterministicModel{
		Partition: partition,
		Init: func() []any {
			return []any{state{lock: Lock{Status: "todo"}}}
		},
		Step: func(st, input, output any) []any {
			s, in, out := st.(state), input.(Input), output.(Output)
			var next []any
			for _, p := range mayHaveDied(s, in) {
				if out.Unknown {
					next = append(next, settle(s, p, in)) // it did not happen
					for _, o := range possibleOutputs(p, in) {
						if ok, n := step(p, in, o); ok {
							next = append(next, settle(s, n, in))
						}
					}
					continue
				}
				if ok, n := step(p, in, out); ok {
					next = append(next, settle(s, n, in))
				}
			}
			return next
		},
		Equal:             stateEqual,
		DescribeOperation: describeOp,
		DescribeState: func(st any) string {
			s := st.(state)
			var f []string
			for k := range s.finished {
				f = append(f, short(k))
			}
			sort.Strings(f)
			return fmt.Sprintf("%s assignee=%s holder=%s epoch=%d blocked=%v finished=[%s]", s.lock.Status, short(s.lock.Assignee), short(s.lock.Holder), s.lock.Epoch, s.lock.Blocked, strings.Join(f, " "))
		},
	}
	return nm.ToModel()
}

// mayHaveDied returns the states s may have become before in took effect
// through events no operation records (RULES.md, Leases): a run whose lease
// ran out is lost at some moment, and a dead holder's lock is cleared (by
// the sweeper, or by L6 when the sweeper fails the run) at some later
// moment, status, assignee and epoch kept. Only the two runs in touches
// matter: the acting run (it may be lost: a later refusal run_not_live is
// then right) and the holder (a checkout or a release may then displace
// it, L1/L3/L4). A run decided lost stays dead for the rest of the
// history, so a late success of it is still caught. s itself is always
// included first.
func mayHaveDied(s state, in Input) []state {
	out := []state{s}
	clear := func(x state) {
		if x.lock.Holder != "" && x.finished[x.lock.Holder] {
			c := x
			c.lock.Holder = ""
			out = append(out, c)
		}
	}
	clear(s)
	for _, run := range []string{in.Run, s.lock.Holder} {
		if run == "" || s.finished[run] {
			continue
		}
		n := len(out)
		for _, x := range out[:n] {
			if x.finished[run] {
				continue
			}
			d := x.withFinished(run)
			out = append(out, d)
			clear(d)
		}
	}
	return out
}

// possibleOutputs returns the successful answer an operation with an
// unknown outcome would have got in state s, if it would have changed
// anything.
func possibleOutputs(s state, in Input) []Output {
	l := s.lock
	switch in.Kind {
	case OpFinish, OpResolve, OpReopen:
		return []Output{{OK: true}}
	case OpCheckout:
		n := l
		n.Status, n.Assignee, n.Holder, n.L7 = "in_progress", in.Agent, in.Run, true
		if l.Holder != in.Run {
			n.Epoch++
		}
		return []Output{{OK: true, Issue: &n}}
	case OpRelease:
		n := l
		n.Holder, n.L7 = "", true
		if n.Status == "in_progress" {
			n.Status = "todo"
		}
		if in.Unassign {
			n.Assignee = ""
		}
		return []Output{{OK: true, Issue: &n}}
	}
	return nil
}

// partition splits a history per issue (see Model).
func partition(history []porcupine.Operation) [][]porcupine.Operation {
	byIssue := map[string][]porcupine.Operation{}
	var shared []porcupine.Operation
	var order []string
	for _, op := range history {
		in := op.Input.(Input)
		switch in.Kind {
		case OpFinish, OpHeartbeat:
			shared = append(shared, op)
		case OpCheckout, OpRelease, OpRead, OpResolve, OpReopen:
			if _, ok := byIssue[in.Issue]; !ok {
				order = append(order, in.Issue)
			}
			byIssue[in.Issue] = append(byIssue[in.Issue], op)
		}
	}
	var out [][]porcupine.Operation
	for _, id := range order {
		// Only the finishes and heartbeats of runs that act on this issue:
		// the others never decide a caller's or a holder's liveness here.
		runs := map[string]bool{}
		for _, op := range byIssue[id] {
			runs[op.Input.(Input).Run] = true
		}
		p := append([]porcupine.Operation(nil), byIssue[id]...)
		for _, op := range shared {
			if runs[op.Input.(Input).Run] {
				p = append(p, op)
			}
		}
		sort.SliceStable(p, func(i, j int) bool { return p[i].Call < p[j].Call })
		markDone(p)
		out = append(out, p)
	}
	return out
}

// markDone sets Input.Done on each run's last operation in p (sorted by
// call) when every other operation of the run in p returned strictly
// before its call: porcupine linearizes an operation after every one that
// returned before it was called, so nothing of the run is stepped after
// it. A run with an operation still open then (an unknown outcome) gets no
// Done and is simply never forgotten.
func markDone(p []porcupine.Operation) {
	last := map[string]int{}
	for i, op := range p {
		if run := op.Input.(Input).Run; run != "" {
			last[run] = i
		}
	}
	overlap := map[string]bool{}
	for i, op := range p {
		in := op.Input.(Input)
		if j, ok := last[in.Run]; ok && j != i && op.Return >= p[j].Call {
			overlap[in.Run] = true
		}
	}
	for run, j := range last {
		if !overlap[run] {
			in := p[j].Input.(Input)
			in.Done = true
			p[j].Input = in
		}
	}
}

func describeOp(input, output any) string {
	in, out := input.(Input), output.(Output)
	var b strings.Builder
	fmt.Fprintf(&b, "%s", in.Kind)
	if in.Issue != "" {
		fmt.Fprintf(&b, " %s", short(in.Issue))
	}
	if in.Run != "" {
		fmt.Fprintf(&b, " run=%s", short(in.Run))
	}
	if in.Unassign {
		b.WriteString(" unassign")
	}
	switch {
	case out.Unknown:
		b.WriteString(" -> ?")
	case out.OK && out.Issue != nil:
		fmt.Fprintf(&b, " -> %s holder=%s epoch=%d", out.Issue.Status, short(out.Issue.Holder), out.Issue.Epoch)
	case out.OK:
		b.WriteString(" -> ok")
	default:
		fmt.Fprintf(&b, " -> %d %s", out.Status, out.Code)
	}
	return b.String()
}

// short abbreviates a UUID for pictures.
func short(id string) string {
	if len(id) > 8 {
		return id[len(id)-8:]
	}
	if id == "" {
		return "-"
	}
	return id
}
