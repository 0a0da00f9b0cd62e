package heartbeat

import (
	"fmt"
	"os/user"
	"strings"
	"sync"
	"testing"

	"github.com/clasp-dev/clasp/internal/store"
)

// uidScheduler is a scheduler over st that is never started: agentUID
// needs only the store.
func uidScheduler(st store.HeartbeatStore, first, last uint32) *Scheduler {
	return New(st, Config{AgentUIDs: &UIDRange{First: first, Last: last}})
}

// TestAgentUIDAllocation: two replicas sharing a database allocate the
// uids of 8 agents at the same time, each agent asked of both: every agent
// gets one uid, the same from both, and no two agents share one. A
// restarted server (a fresh scheduler) finds the same uids; a full range
// is an error that says so; after a range change the agents get uids of
// the new range, never one owned by another agent in any range.
func TestAgentUIDAllocation(t *testing.T) {
	stores(t, func(t *testing.T, open func() store.HeartbeatStore) {
		st := open()
		ctx := t.Context()
		r1, r2 := uidScheduler(st, 500000, 500009), uidScheduler(st, 500000, 500009)
		agents := make([]string, 8)
		for i := range agents {
			agents[i] = fmt.Sprintf("agent-%d", i)
		}
		got := make([][2]uint32, len(agents))
		var wg sync.WaitGroup
		for i, a := range agents {
			for j, s := range []*Scheduler{r1, r2} {
				wg.Go(func() {
					uid, ok, err := s.agentUID(ctx, a, true)
					if err != nil || !ok {
						t.Errorf("replica %d: uid of %s: %d, %v, %v", j, a, uid, ok, err)
					}
					got[i][j] = uid
				})
			}
		}
		wg.Wait()
		owner := map[uint32]string{}
		for i, a := range agents {
			uid := got[i][0]
			if got[i][1] != uid {
				t.Errorf("%s: replica 1 gave uid %d, replica 2 %d", a, uid, got[i][1])
			}
			if uid < 500000 || uid > 500009 {
				t.Errorf("%s: uid %d is not in 500000-500009", a, uid)
			}
			if o, dup := owner[uid]; dup {
				t.Errorf("%s and %s share uid %d", o, a, uid)
			}
			owner[uid] = a
		}

		restarted := uidScheduler(st, 500000, 500009)
		for i, a := range agents {
			if uid, ok, err := restarted.agentUID(ctx, a, false); err != nil || !ok || uid != got[i][0] {
				t.Errorf("after a restart, %s: uid %d, %v, %v; want %d", a, uid, ok, err, got[i][0])
			}
		}
		if _, ok, err := restarted.agentUID(ctx, "never-ran", false); ok || err != nil {
			t.Errorf("an agent that never ran has a uid without allocating: %v, %v", ok, err)
		}
		for _, a := range []string{"agent-8", "agent-9"} {
			uid, _, err := restarted.agentUID(ctx, a, true)
			if err != nil {
				t.Fatalf("uid of %s: %v", a, err)
			}
			if o, dup := owner[uid]; dup {
				t.Errorf("%s and %s share uid %d", o, a, uid)
			}
			owner[uid] = a
		}
		if _, _, err := restarted.agentUID(ctx, "agent-10", true); err == nil || !strings.Contains(err.Error(), "every uid of --agent-uid-range 500000-500009 is taken") {
			t.Errorf("an 11th agent in a range of 10: got %v, want the range is used up", err)
		}

		// A changed range, overlapping the old one by 3 uids: a uid owned
		// by an agent goes to no other one.
		moved := uidScheduler(st, 500007, 500016)
		seen := map[uint32]string{}
		for _, a := range []string{"agent-0", "agent-1", "agent-2", "agent-3", "agent-4"} {
			uid, ok, err := moved.agentUID(ctx, a, true)
			if err != nil || !ok || uid < 500007 || uid > 500016 {
				t.Errorf("new range, %s: uid %d, %v, %v; want one of 500007-500016", a, uid, ok, err)
			}
			if o, taken := owner[uid]; taken && o != a {
				t.Errorf("new range: %s got uid %d, which %s owns", a, uid, o)
			}
			if o, dup := seen[uid]; dup {
				t.Errorf("new range: %s and %s share uid %d", o, a, uid)
			}
			seen[uid] = a
		}
	})
}

// TestAgentUIDSkipsSystemAccounts: a uid that names an account of the
// system (nobody's 65534 here) is never given to an agent.
func TestAgentUIDSkipsSystemAccounts(t *testing.T) {
	u, err := user.LookupId("65534")
	if err != nil {
		t.Skipf("no account with uid 65534 on this machine: %v", err)
	}
	stores(t, func(t *testing.T, open func() store.HeartbeatStore) {
		s := uidScheduler(open(), 65534, 65535)
		if systemID(65535) {
			t.Skip("uid or gid 65535 is an account of this machine too")
		}
		for _, a := range []string{"a", "b", "c"} {
			uid, _, err := s.agentUID(t.Context(), a, true)
			if uid == 65534 {
				t.Errorf("agent %s got uid 65534, the account %s", a, u.Username)
			}
			if a != "a" && err == nil {
				t.Errorf("agent %s got uid %d of a range with one free uid, taken by agent a", a, uid)
			}
		}
	})
}
