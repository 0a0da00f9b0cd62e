package swarm

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/clasp-dev/clasp"
)

// TestReplayActivity feeds the activity replay hand-written logs, one per
// way a lock change can go unaccounted for, and checks that each is named
// (and that a clean log is not).
func TestReplayActivity(t *testing.T) {
	t.Parallel()
	type row struct {
		action  string
		run     string
		details string
	}
	const r1, r2 = "run-1", "run-2"
	checked := func(run string, epoch int) row {
		return row{clasp.ActionIssueCheckedOut, run, fmt.Sprintf(`{"agentId":"a","runId":%q,"checkoutEpoch":%d}`, run, epoch)}
	}
	adopted := func(run, prev string) row {
		return row{clasp.ActionIssueLockAdopted, run, fmt.Sprintf(`{"previousCheckoutRunId":%q,"previousExecutionRunId":%q,"why":"lost"}`, prev, prev)}
	}
	released := func(run, prev string) row {
		return row{clasp.ActionIssueReleased, run, fmt.Sprintf(`{"previousCheckoutRunId":%q,"previousExecutionRunId":%q,"unassigned":false,"cause":"update"}`, prev, prev)}
	}
	moved := func(from, to string) row {
		return row{clasp.ActionIssueLockMoved, "", fmt.Sprintf(`{"fromRunId":%q,"toRunId":%q,"clearedCheckoutRunId":%q}`, from, to, from)}
	}
	done := func(run string) row {
		return row{clasp.ActionIssueUpdated, run, `{"status":{"from":"in_progress","to":"done"}}`}
	}
	tests := []struct {
		name  string
		epoch int64
		rows  []row
		want  []string // Violation.Check values, in order
	}{
		{"clean", 1, []row{checked(r1, 1), done(r1)}, nil},
		{"clean adoption, adopted row first", 2, []row{checked(r1, 1), adopted(r2, r1), checked(r2, 2), done(r2)}, nil},
		{"clean adoption, adopted row second", 2, []row{checked(r1, 1), checked(r2, 2), adopted(r2, r1), done(r2)}, nil},
		{"clean sweep", 2, []row{checked(r1, 1), {clasp.ActionIssueStaleLockCleared, "", `{"clearedCheckoutRunId":"run-1","clearedExecutionRunId":"run-1","why":"lease_expired"}`}, checked(r2, 2), done(r2)}, nil},
		{"clean, the store's own shape: released by the PATCH, then updated", 1, []row{checked(r1, 1), released(r1, r1), {clasp.ActionIssueUpdated, r1, `{"status":"done"}`}}, nil},
		{"release names the wrong holder", 1, []row{checked(r1, 1), released(r1, r2), {clasp.ActionIssueUpdated, r1, `{"status":"done"}`}}, []string{CheckLockActivity}},
		{"done after another run's release", 1, []row{checked(r1, 1), released(r1, r1), {clasp.ActionIssueUpdated, r2, `{"status":"done"}`}}, []string{CheckOwner}},
		{"lock taken without adoption row", 2, []row{checked(r1, 1), checked(r2, 2), done(r2)}, []string{CheckLockActivity}},
		{"adoption names the wrong holder", 2, []row{checked(r1, 1), adopted(r2, "run-9"), checked(r2, 2), done(r2)}, []string{CheckLockActivity}},
		{"adoption without checkout", 1, []row{checked(r1, 1), adopted(r2, r1), done(r1)}, []string{CheckLockActivity}},
		{"same run checked out twice", 2, []row{checked(r1, 1), checked(r1, 2), done(r1)}, []string{CheckLockActivity}},
		{"epoch column differs", 3, []row{checked(r1, 1), done(r1)}, []string{CheckEpoch}},
		{"epoch in row skips", 2, []row{checked(r1, 2), done(r1)}, []string{CheckEpoch, CheckEpoch}},
		{"lock_released names another run", 1, []row{checked(r1, 1), {clasp.ActionIssueLockReleased, r2, `{"runId":"run-2","runStatus":"failed"}`}}, []string{CheckLockActivity}}, // no status change anywhere: the store records none, no done count
		{"done by a run without the lock", 2, []row{checked(r1, 1), {clasp.ActionIssueStaleLockCleared, "", `{"clearedCheckoutRunId":"run-1"}`}, done(r2)}, []string{CheckOwner, CheckEpoch}},
		{"done twice", 1, []row{checked(r1, 1), done(r1), {clasp.ActionIssueUpdated, r1, `{"status":{"from":"todo","to":"done"}}`}}, []string{CheckOwner, CheckDoneCount}},
		// A lost run's execution lock moves to its retry (its checkout lock
		// cleared); the retry ends without checking the issue out: its
		// lock_released names the lock it was handed.
		{"clean hand-over to a retry that never checks out", 1, []row{checked(r1, 1), moved(r1, r2),
			{clasp.ActionIssueLockReleased, r2, `{"runId":"run-2","runStatus":"succeeded"}`}}, nil},
		{"clean hand-over, the retry finishes the issue", 2, []row{checked(r1, 1), moved(r1, r2), checked(r2, 2), done(r2)}, nil},
		{"clean wake lock, then adoption of the dead waker", 1, []row{
			{clasp.ActionIssueExecutionLocked, "", `{"runId":"run-1","previousCheckoutRunId":null,"previousExecutionRunId":null}`},
			{clasp.ActionIssueLockAdopted, r2, `{"previousCheckoutRunId":null,"previousExecutionRunId":"run-1","why":"terminal"}`},
			checked(r2, 1), done(r2)}, nil},
		{"hand-over names another run", 1, []row{checked(r1, 1), moved("run-9", r2),
			{clasp.ActionIssueLockReleased, r2, `{"runId":"run-2","runStatus":"succeeded"}`}}, []string{CheckLockActivity}},
		{"retry's lock never released", 1, []row{checked(r1, 1), moved(r1, r2)}, []string{CheckLockActivity}},
		{"log leaves a lock", 1, []row{checked(r1, 1), {clasp.ActionIssueUpdated, r1, `{"title":{"from":"a","to":"b"}}`}}, []string{CheckLockActivity}}, // no status change anywhere: the store records none, no done count
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			iss := &clasp.Issue{ID: "issue-1", Identifier: "SW-1", CheckoutEpoch: tt.epoch, CreatedAt: time.Now()}
			var acts []*clasp.Activity
			for i, r := range tt.rows {
				a := &clasp.Activity{ID: int64(i + 1), ActorType: clasp.ActorAgent, Action: r.action, EntityType: "issue", EntityID: iss.ID, Details: json.RawMessage(r.details)}
				if r.run == "" {
					a.ActorType = clasp.ActorSystem
				} else {
					a.RunID = &r.run
				}
				acts = append(acts, a)
			}
			var got []string
			var tally Tally
			replayActivity(acts, []*clasp.Issue{iss}, map[string]result{}, &tally, func(issue, check, format string, args ...any) {
				got = append(got, check)
				t.Logf("%s: %s: %s", issue, check, fmt.Sprintf(format, args...))
			})
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("violations (-want +got):\n%s", diff)
			}
		})
	}
}

func TestStatusChange(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		details  string
		from, to string
		ok       bool
	}{
		{`{"status":"done"}`, "", "done", true},
		{`{"status":{"from":"in_progress","to":"done"}}`, "in_progress", "done", true},
		{`{"changes":{"status":{"from":"todo","to":"done"}}}`, "todo", "done", true},
		{`{"status":["todo","done"]}`, "todo", "done", true},
		{`{"status":{"old":"todo","new":"blocked"}}`, "todo", "blocked", true},
		{`{"title":{"from":"a","to":"b"}}`, "", "", false},
		{`not json`, "", "", false},
	} {
		from, to, ok := statusChange(json.RawMessage(tt.details))
		if from != tt.from || to != tt.to || ok != tt.ok {
			t.Errorf("statusChange(%s) = %q, %q, %v; want %q, %q, %v", tt.details, from, to, ok, tt.from, tt.to, tt.ok)
		}
	}
}

func TestParseEvent(t *testing.T) {
	t.Parallel()
	var b strings.Builder
	ew := NewEventWriter(&b)
	ew.Emit(EventCheckedOut, "issue", "SW-3", "run", "r-1", "epoch", 2)
	ew.Emit(EventExit, "reason", "error", "error", `boom "quoted" text`, "empty", "")
	lines := strings.Split(strings.TrimSuffix(b.String(), "\n"), "\n")
	if len(lines) != 2 {
		t.Fatalf("got %d lines, want 2: %q", len(lines), lines)
	}
	if lines[0] != "event=checked_out issue=SW-3 run=r-1 epoch=2" {
		t.Errorf("line = %q", lines[0])
	}
	want := []Event{
		{Name: EventCheckedOut, Fields: map[string]string{"issue": "SW-3", "run": "r-1", "epoch": "2"}},
		{Name: EventExit, Fields: map[string]string{"reason": "error", "error": `boom "quoted" text`, "empty": ""}},
	}
	for i, l := range lines {
		ev, ok := ParseEvent(l)
		if !ok {
			t.Fatalf("ParseEvent(%q) not ok", l)
		}
		if diff := cmp.Diff(want[i], ev); diff != "" {
			t.Errorf("ParseEvent(%q) (-want +got):\n%s", l, diff)
		}
	}
	for _, bad := range []string{"", "hello", "time=1 event=x", `event=x k="unterminated`} {
		if ev, ok := ParseEvent(bad); ok {
			t.Errorf("ParseEvent(%q) = %v, want not ok", bad, ev)
		}
	}
}
