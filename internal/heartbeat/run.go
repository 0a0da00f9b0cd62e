package heartbeat

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"sort"
	"syscall"
	"time"

	"github.com/clasp-dev/clasp"
	"github.com/clasp-dev/clasp/internal/store"
)

// startRun starts queued run r of an agent with adapter c, if the store
// gives it a slot (RunStart), and spawns its process.
func (s *Scheduler) startRun(ctx context.Context, r *clasp.Run, c *clasp.AdapterConfig) {
	token, hash := "", ""
	if s.cfg.NewRunToken != nil {
		token, hash = s.cfg.NewRunToken()
	}
	run, err := s.st.RunStart(ctx, &store.RunStartParams{RunID: r.ID, HostID: s.cfg.HostID, TokenHash: hash,
		LeaseTTL: s.cfg.LeaseTTL, MaxRunning: c.Heartbeat.MaxConcurrentRuns})
	if err != nil {
		if code := clasp.ErrorCode(err); code != clasp.CodePreconditionFailed && code != clasp.CodeRunNotLive && ctx.Err() == nil {
			s.log.Error("heartbeat: start run", "run", r.ID, "err", err)
		}
		return
	}
	p := newProc(ctx, run)
	if !s.track(p) {
		p.release()
		return
	}
	if err := s.spawn(p.ctx, p, c, token); err != nil {
		s.untrack(p)
		s.log.Error("heartbeat: spawn", "run", run.ID, "err", err)
		s.finishCode(context.WithoutCancel(ctx), run.ID, clasp.RunFailed, nil, "spawn failed: "+err.Error(), clasp.RunErrorSpawnFailed)
	}
}

// env is the process environment of a run: the allowlisted variables of
// the server's (baseEnv: never its secrets; HOME is u's when u, the run's
// user, is not nil), the CA file of an https://
// API URL (Config.CACert), the adapter's env, then the
// run's credentials under the CLASP_* and PAPERCLIP_* names, and
// PAPERCLIP_TASK_ID and PAPERCLIP_LINKED_ISSUE_IDS (the run's issue,
// empty for none), which Paperclip agents read.
func (s *Scheduler) env(run *clasp.Run, c *clasp.AdapterConfig, token string, u *AgentUser) []string {
	env := baseEnv(os.Environ(), u)
	if ca := s.cfg.CACert; ca != "" {
		env = append(env, "CLASP_CA_CERT="+ca, "NODE_EXTRA_CA_CERTS="+ca)
	}
	keys := make([]string, 0, len(c.Env))
	for k := range c.Env {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		env = append(env, k+"="+c.Env[k])
	}
	issue := ""
	if run.IssueID != nil {
		issue = *run.IssueID
	}
	// The names only a Paperclip agent reads: its wake's task (the issue)
	// and the issues linked to the wake (the same one, comma-separated).
	env = append(env, "PAPERCLIP_TASK_ID="+issue, "PAPERCLIP_LINKED_ISSUE_IDS="+issue)
	for _, kv := range [][2]string{
		{"API_URL", s.cfg.APIURL}, {"API_KEY", token}, {"RUN_ID", run.ID}, {"AGENT_ID", run.AgentID},
		{"COMPANY_ID", run.CompanyID}, {"ISSUE_ID", issue}, {"WAKE_REASON", run.InvocationSource},
	} {
		env = append(env, "CLASP_"+kv[0]+"="+kv[1], "PAPERCLIP_"+kv[0]+"="+kv[1])
	}
	return env
}

// spawn starts the run's shim (shim.go), which starts the adapter's
// command, in a process group of its own, records the shim's pid and
// start time (the run's process), and watches it until it ends. A
// command that cannot be resolved, or a working directory or log that
// cannot be made, is an error and nothing is left running.
func (s *Scheduler) spawn(ctx context.Context, p *proc, c *clasp.AdapterConfig, token string) error {
	run := p.run
	agent := exec.Command(c.Command, c.Args...) // #nosec G204 -- the agent command the board configured, run without a shell in the agent's isolation
	if agent.Err != nil {
		return agent.Err
	}
	lf, err := openLogFile(s.cfg.LogDir, run.ID)
	if err != nil {
		return err
	}
	defer lf.Close() // the shim holds its own copy
	sf, err := openStatus(s.cfg.LogDir, run.ID)
	if err != nil {
		return err
	}
	defer sf.Close()
	u, err := s.runUser(ctx, run)
	if err != nil {
		s.removeStatus(run.ID)
		return err
	}
	dir, err := s.runDir(run.ID, c.Cwd, u)
	if err != nil {
		s.removeStatus(run.ID)
		return err
	}
	cmd := exec.Command("/proc/self/exe") // #nosec G204 -- this same binary, as the run's shim
	cmd.Args = append([]string{"clasp"}, shimArgs(s.cfg.MaxLogBytes, s.cfg.KillGrace, agent.Path, agent.Args)...)
	cmd.Dir = dir
	cmd.Env = s.env(run, c, token, u)
	cmd.ExtraFiles = []*os.File{lf, sf}
	cmd.SysProcAttr = sysProcAttr(u)
	if err := cmd.Start(); err != nil {
		s.removeRunDir(run.ID)
		s.removeStatus(run.ID)
		var pe *os.PathError
		if errors.As(err, &pe) {
			pe.Path = agent.Path // the command that could not start, not the shim's path
		}
		return err
	}
	p.pid = cmd.Process.Pid
	p.start, _ = ProcStart(p.pid)
	if err := s.st.RunSetProcess(ctx, run.ID, s.cfg.HostID, p.pid, p.start); err != nil {
		s.log.Error("heartbeat: record process", "run", run.ID, "err", err)
	}
	s.log.Info("heartbeat: started run", "run", run.ID, "agent", run.AgentID, "pid", p.pid, "reason", run.InvocationSource)
	s.wg.Add(1)
	go s.watch(ctx, p, cmd, time.Duration(c.TimeoutSec)*time.Second)
	return nil
}

// outputDrain bounds the reading of a run's output after its command
// exited: output that the rest of its process group writes later is dropped.
const outputDrain = time.Second

// watch waits for a run's shim: it renews the run's lease while it lives,
// stops its group on timeout or cancel, and ends the run by how its
// command ended (the status file of its shim; the shim's own end when it
// recorded none), whatever other processes of its group still run (see
// endByStatus); timeout timed_out; cancel cancelled. Before the run ends,
// the rest of its process group is stopped (SIGTERM, SIGKILL after
// KillGrace), its lease renewed meanwhile.
func (s *Scheduler) watch(ctx context.Context, p *proc, cmd *exec.Cmd, timeout time.Duration) {
	defer s.wg.Done()
	defer s.untrack(p)
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	var timer <-chan time.Time
	if timeout > 0 {
		t := time.NewTimer(timeout)
		defer t.Stop()
		timer = t.C
	}
	renew := time.NewTicker(s.cfg.LeaseTTL / 3)
	defer renew.Stop()
	bg := context.WithoutCancel(ctx)
	var stopped clasp.RunStatus
	stop := func(st clasp.RunStatus) {
		if stopped == "" {
			stopped = st
			go s.terminate(p.pid, func() bool { return Alive(p.pid, p.start) })
		}
	}
	var werr error
loop:
	for {
		select {
		case werr = <-exited:
			break loop
		case <-ctx.Done():
			// The server stops, or another instance took the run over: the
			// process keeps running (its shim keeps writing its log); the
			// instance that takes it over re-adopts it.
			return
		case <-timer:
			stop(clasp.RunTimedOut)
		case st := <-p.stopping:
			stop(st)
		case <-renew.C:
			err := s.st.RunRenew(ctx, p.run.ID, s.cfg.HostID, s.cfg.LeaseTTL)
			switch {
			case clasp.ErrorCode(err) == clasp.CodeRunNotLive:
				// Ended elsewhere (finished, cancelled on another replica,
				// agent terminated) or its lease ran out: the process
				// must not outlive its run.
				stop(runEnded)
			case err != nil:
				s.log.Error("heartbeat: renew lease", "run", p.run.ID, "err", err)
			}
		}
	}
	// The leader is gone; nothing of its group may outlive the run.
	gone := make(chan struct{})
	go func() { s.terminate(p.pid, func() bool { return false }); close(gone) }()
	for waiting := true; waiting; {
		select {
		case <-gone:
			waiting = false
		case <-renew.C:
			if err := s.st.RunRenew(bg, p.run.ID, s.cfg.HostID, s.cfg.LeaseTTL); err != nil && clasp.ErrorCode(err) != clasp.CodeRunNotLive {
				s.log.Error("heartbeat: renew lease", "run", p.run.ID, "err", err)
			}
		}
	}
	s.removeRunDir(p.run.ID)
	es, ok := readStatus(s.cfg.LogDir, p.run.ID)
	s.removeStatus(p.run.ID)
	if !ok && cmd.ProcessState != nil {
		// The shim recorded nothing (it was killed): its own end stands.
		ws, _ := cmd.ProcessState.Sys().(syscall.WaitStatus)
		es, ok = exitStatus{signaled: ws.Signaled(), signal: ws.Signal(), code: ws.ExitStatus()}, true
	}
	switch {
	case stopped == runEnded:
		s.log.Info("heartbeat: stopped the process of an ended run", "run", p.run.ID, "pid", p.pid)
		s.Nudge()
	case stopped == clasp.RunTimedOut:
		s.finish(bg, p.run.ID, clasp.RunTimedOut, nil, fmt.Sprintf("timed out: the process outlived timeoutSec (%s)", timeout))
	case stopped != "":
		s.finish(bg, p.run.ID, stopped, nil, "cancelled: the process group was stopped")
	case !ok:
		s.lost(bg, p.run.ID, fmt.Sprintf("process lost: %v", werr))
	default:
		s.endByStatus(bg, p.run.ID, es)
	}
	s.endStrays(bg, p.run)
}

// endByStatus ends run runID by how its command ended (a failure's error
// ends with the last lines of its log, withLogTail): exit 0 succeeded,
// another exit failed (exitCode), killed by a signal this scheduler did
// not send: process lost (one retry), a command that could not start:
// failed with spawn_failed.
func (s *Scheduler) endByStatus(ctx context.Context, runID string, es exitStatus) {
	switch {
	case es.spawnErr != "":
		s.finishCode(ctx, runID, clasp.RunFailed, nil, "spawn failed: "+es.spawnErr, clasp.RunErrorSpawnFailed)
	case es.signaled:
		s.lost(ctx, runID, withLogTail(fmt.Sprintf("process lost: killed by signal %s", es.signal), s.cfg.LogDir, runID))
	case es.code == 0:
		code := 0
		s.finish(ctx, runID, clasp.RunSucceeded, &code, "")
	default:
		code := es.code
		s.finish(ctx, runID, clasp.RunFailed, &code, withLogTail(fmt.Sprintf("the process exited with %d", code), s.cfg.LogDir, runID))
	}
}
