package heartbeat

import (
	"fmt"
	"os"
	"os/user"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
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

// TestAgentHomeHandedOver (root): an agent's home is made 0700 and owned
// by its uid under a 0711 parent; when its uid changes (a new range) the
// home and everything in it are handed to the new uid, but a symbolic link
// in it is not followed: the file it names keeps its owner.
func TestAgentHomeHandedOver(t *testing.T) {
	if os.Geteuid() != 0 {
		if os.Getenv("CI") != "" {
			t.Fatalf("handing a home to another uid needs root, and CI runs the tests as root; they run as uid %d", os.Geteuid())
		}
		t.Skipf("handing a home to another uid needs root (the tests run as uid %d); CI runs them as root", os.Geteuid())
	}
	outside := filepath.Join(t.TempDir(), "outside")
	if err := os.WriteFile(outside, []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	s := New(nil, Config{HomeDir: filepath.Join(t.TempDir(), "homes")})
	home, err := s.agentHome("agent-1", 500001)
	if err != nil {
		t.Fatal(err)
	}
	owner := func(p string) (uint32, os.FileMode) {
		t.Helper()
		fi, err := os.Lstat(p)
		if err != nil {
			t.Fatal(err)
		}
		return fi.Sys().(*syscall.Stat_t).Uid, fi.Mode().Perm()
	}
	if uid, mode := owner(home); uid != 500001 || mode != 0o700 {
		t.Errorf("home: uid %d mode %o, want 500001 0700", uid, mode)
	}
	if _, mode := owner(filepath.Dir(home)); mode != 0o711 {
		t.Errorf("homes directory: mode %o, want 0711", mode)
	}
	if err := os.MkdirAll(filepath.Join(home, "sub"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(home, "sub", "f"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, filepath.Join(home, "link")); err != nil {
		t.Fatal(err)
	}
	if _, err := s.agentHome("agent-1", 500002); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{home, filepath.Join(home, "sub"), filepath.Join(home, "sub", "f"), filepath.Join(home, "link")} {
		if uid, _ := owner(p); uid != 500002 {
			t.Errorf("%s: owned by %d after the handover, want 500002", p, uid)
		}
	}
	if uid, _ := owner(outside); uid != 0 {
		t.Errorf("the file the home's symbolic link names was given to uid %d", uid)
	}
}
