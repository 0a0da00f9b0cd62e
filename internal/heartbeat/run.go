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
// the server's (baseEnv: never its secrets), the CA file of an https://
// API URL (Config.CACert), the adapter's env, then the
// run's credentials under the CLASP_* and PAPERCLIP_* names, and
// PAPERCLIP_TASK_ID and PAPERCLIP_LINKED_ISSUE_IDS (the run's issue,
// empty for none), which Paperclip agents read.
func (s *Scheduler) env(run *clasp.Run, c *clasp.AdapterConfig, token string) []string {
	env := baseEnv(os.Environ(), s.cfg.AgentUser)
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

// spawn starts the run's process in its own process group, records its
// pid and start time, and watches it until it ends.
func (s *Scheduler) spawn(ctx context.Context, p *proc, c *clasp.AdapterConfig, token string) error {
	run := p.run
	lg, err := openLog(s.cfg.LogDir, run.ID, s.cfg.MaxLogBytes)
	if err != nil {
		return err
	}
	lg.secrets = []string{token}
	dir, err := s.runDir(run.ID, c.Cwd)
	if err != nil {
		_ = lg.Close() // nothing was written yet; the run-directory error is the one returned
		return err
	}
	cmd := exec.Command(c.Command, c.Args...) // #nosec G204 -- the agent command the board configured, run without a shell in the agent's isolation
	cmd.Dir = dir
	cmd.Env = s.env(run, c, token)
	cmd.Stdout, cmd.Stderr = lg, lg
	// Wait also waits for the output pipe to close, which a child that
	// outlives the main process holds open: the run ends when the main
	// process exits, its remaining output is read for outputDrain at most.
	cmd.WaitDelay = outputDrain
	cmd.SysProcAttr = s.sysProcAttr()
	if err := cmd.Start(); err != nil {
		_ = lg.Close() // nothing was written yet; the setup error is the one returned
		s.removeRunDir(run.ID)
		return err
	}
	p.pid = cmd.Process.Pid
	p.start, _ = ProcStart(p.pid)
	if err := s.st.RunSetProcess(ctx, run.ID, s.cfg.HostID, p.pid, p.start); err != nil {
		s.log.Error("heartbeat: record process", "run", run.ID, "err", err)
	}
	s.log.Info("heartbeat: started run", "run", run.ID, "agent", run.AgentID, "pid", p.pid, "reason", run.InvocationSource)
	s.wg.Add(1)
	go s.watch(ctx, p, cmd, lg, time.Duration(c.TimeoutSec)*time.Second)
	return nil
}

// outputDrain bounds the reading of a run's output after its main process
// exited: output that the rest of its process group writes later is dropped.
const outputDrain = time.Second

// watch waits for a child: it renews the run's lease while it lives,
// stops its group on timeout or cancel, and ends the run by how its main
// process ended, whatever other processes of its group still run: exit 0
// succeeded, another exit failed (exitCode), killed by a signal this
// scheduler did not send: process lost (one retry); timeout timed_out;
// cancel cancelled. Before the run ends, the rest of its process group is
// stopped (SIGTERM, SIGKILL after KillGrace), its lease renewed meanwhile.
func (s *Scheduler) watch(ctx context.Context, p *proc, cmd *exec.Cmd, lg *cappedLog, timeout time.Duration) {
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
			// process keeps running; the instance that takes it over re-adopts it.
			if err := lg.Close(); err != nil {
				s.log.Warn("heartbeat: close run log", "run", p.run.ID, "err", err)
			}
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
	if err := lg.Close(); err != nil {
		s.log.Warn("heartbeat: close run log (its tail may be missing)", "run", p.run.ID, "err", err)
	}
	s.removeRunDir(p.run.ID)
	code := cmd.ProcessState.ExitCode()
	ws, _ := cmd.ProcessState.Sys().(syscall.WaitStatus)
	switch {
	case stopped == runEnded:
		s.log.Info("heartbeat: stopped the process of an ended run", "run", p.run.ID, "pid", p.pid)
		s.Nudge()
	case stopped == clasp.RunTimedOut:
		s.finish(bg, p.run.ID, clasp.RunTimedOut, nil, fmt.Sprintf("timed out: the process outlived timeoutSec (%s)", timeout))
	case stopped != "":
		s.finish(bg, p.run.ID, stopped, nil, "cancelled: the process group was stopped")
	case werr == nil || errors.Is(werr, exec.ErrWaitDelay):
		// ErrWaitDelay: exit 0, output of the rest of the group dropped.
		s.finish(bg, p.run.ID, clasp.RunSucceeded, &code, "")
	case ws.Signaled():
		s.lost(bg, p.run.ID, fmt.Sprintf("process lost: killed by signal %s", ws.Signal()))
	default:
		var ee *exec.ExitError
		msg := fmt.Sprintf("the process exited with %d", code)
		if !errors.As(werr, &ee) {
			msg = werr.Error()
		}
		s.finish(bg, p.run.ID, clasp.RunFailed, &code, msg)
	}
}
