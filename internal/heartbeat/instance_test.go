package heartbeat

import (
	"fmt"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/clasp-dev/clasp"
	"github.com/clasp-dev/clasp/internal/store"
)

// idleScheduler is a started scheduler (default instance id: a fresh one)
// whose loop waits an hour between passes, so the test drives its passes
// with RunOnce. It returns once the loop's first pass (which runs at Start)
// is over, so that pass cannot start a run the test queues afterwards.
func idleScheduler(t *testing.T, st store.HeartbeatStore) *Scheduler {
	s := New(st, Config{APIURL: "http://127.0.0.1:1", Interval: time.Hour, LeaseTTL: time.Minute,
		LogDir: filepath.Join(t.TempDir(), "logs"), KillGrace: 300 * time.Millisecond,
		NewRunToken: func() (string, string) { return "clasp_rt_test", fmt.Sprint(time.Now().UnixNano()) }})
	first := make(chan struct{})
	var once sync.Once
	s.afterPass = func() { once.Do(func() { close(first) }) }
	if err := s.Start(t.Context()); err != nil {
		t.Fatalf("start scheduler: %v", err)
	}
	t.Cleanup(s.Stop)
	<-first
	return s
}

// Two schedulers of one machine (two servers on one host) are two
// instances: a run started by the first whose pid is not recorded yet is
// judged by neither (the other's pid check used to fail it with "pid 0 is
// gone" while its process was being started).
func TestInstancesJudgeOnlyTheirOwnRuns(t *testing.T) {
	stores(t, func(t *testing.T, open func() store.HeartbeatStore) {
		st := open()
		f := newFixture(t, st, agentScript, 0)
		s1 := idleScheduler(t, st)
		s2 := idleScheduler(t, st)
		if s1.HostID() == s2.HostID() {
			t.Errorf("two schedulers share the instance id %q", s1.HostID())
		}
		w := f.wake(t)
		// The first instance's RunStart, before its spawn records the pid.
		if _, err := st.RunStart(t.Context(), &store.RunStartParams{RunID: w.Run.ID, HostID: s1.HostID(), LeaseTTL: time.Minute, MaxRunning: 1}); err != nil {
			t.Fatalf("start run: %v", err)
		}
		for range 3 {
			s2.RunOnce(t.Context())
			s1.RunOnce(t.Context())
		}
		if got := f.run(t, w.Run.ID); got.Status != clasp.RunRunning || got.Error != nil {
			t.Fatalf("run without a recorded pid after passes of both instances: got %s (%s), want running", got.Status, deref(got.Error))
		}
		if r := f.retryOf(t, w.Run.ID); r != nil {
			t.Fatalf("run without a recorded pid was retried: %s", r.ID)
		}
	})
}

// A run's process is stopped when its run ends by another path than the
// process's exit: cancelled in the store (as by another replica's POST
// /api/runs/{id}/cancel) or its agent terminated. The run keeps the status
// that path gave it.
func TestProcessNeverOutlivesItsRun(t *testing.T) {
	for _, how := range []string{"cancelled elsewhere", "agent terminated"} {
		t.Run(how, func(t *testing.T) {
			stores(t, func(t *testing.T, open func() store.HeartbeatStore) {
				st := open()
				f := newFixture(t, st, agentScript, 0)
				newScheduler(t, st, "")
				r := f.runningWithPID(t, f.wake(t).Run.ID)
				switch how {
				case "cancelled elsewhere":
					msg := "cancelled by the board"
					if _, err := st.RunFinish(t.Context(), &store.RunFinishParams{RunID: r.ID, Status: clasp.RunCancelled, Error: &msg, Actor: board}); err != nil {
						t.Fatalf("cancel: %v", err)
					}
				case "agent terminated":
					term := clasp.AgentTerminated
					if _, err := st.AgentUpdate(t.Context(), &store.AgentUpdateParams{AgentID: f.agent.ID, Status: &term, Actor: board}); err != nil {
						t.Fatalf("terminate agent: %v", err)
					}
				}
				eventually(t, "the process group of the ended run gone", func() bool { return !groupAlive(*r.PID) })
				if got := f.run(t, r.ID); got.Status != clasp.RunCancelled {
					t.Errorf("run after its process was stopped: got %s, want cancelled (as the path that ended it left it)", got.Status)
				}
			})
		})
	}
}

// A server stops abruptly (its scheduler's lease ends, as a SIGKILLed
// server's process is gone) while its run's process lives; the run ends
// while it is down. A new instance of the machine takes the old one over
// and kills the process that outlived its run, and re-adopts the live
// process of a run that is still running.
func TestTakeOverKillsProcessesOfEndedRuns(t *testing.T) {
	stores(t, func(t *testing.T, open func() store.HeartbeatStore) {
		st := open()
		f := newFixture(t, st, agentScript, 0)
		ctx := t.Context()
		b, _ := st.AgentCreate(ctx, &store.AgentCreateParams{CompanyID: f.agent.CompanyID, Name: "beta", Actor: board})
		cfg, _ := st.AgentAdapterGet(ctx, f.agent.ID)
		st.AgentAdapterSet(ctx, &store.AgentAdapterSetParams{AgentID: b.ID, Config: cfg, Actor: board})

		s1 := New(st, Config{Interval: 50 * time.Millisecond, LogDir: t.TempDir(), KillGrace: 300 * time.Millisecond})
		if err := s1.Start(ctx); err != nil {
			t.Fatal(err)
		}
		ended := f.runningWithPID(t, f.wake(t).Run.ID)
		wb, err := st.Wake(ctx, &store.WakeParams{AgentID: b.ID, Reason: clasp.InvocationOnDemand, Actor: board})
		if err != nil {
			t.Fatal(err)
		}
		live := f.runningWithPID(t, wb.Run.ID)
		s1.Stop() // nothing ends the runs or their processes
		t.Cleanup(func() { syscall.Kill(-*live.PID, syscall.SIGKILL); syscall.Kill(-*ended.PID, syscall.SIGKILL) })
		msg := "cancelled while its server was down"
		if _, err := st.RunFinish(ctx, &store.RunFinishParams{RunID: ended.ID, Status: clasp.RunCancelled, Error: &msg, Actor: board}); err != nil {
			t.Fatal(err)
		}
		if !groupAlive(*ended.PID) {
			t.Fatalf("the process of the ended run is gone before any new instance ran")
		}
		s2 := newScheduler(t, st, "")
		eventually(t, "the process that outlived its run gone", func() bool { return !groupAlive(*ended.PID) })
		if got := f.run(t, live.ID); got.Status != clasp.RunRunning || deref(got.HostID) != s2.HostID() {
			t.Fatalf("live run after the take-over: got %s on %q, want running on %s (re-adopted)", got.Status, deref(got.HostID), s2.HostID())
		}
		if !groupAlive(*live.PID) {
			t.Fatalf("the live run's process was stopped")
		}
	})
}
