// Package heartbeat runs server-managed agents: a scheduler that
// wakes agents (on a timer, when an issue is assigned to them, on demand),
// starts their queued runs as real processes with the run's credentials,
// watches them (exit, timeout, cancel), renews their leases while they
// live, and notices processes that are gone (process loss: one retry, see
// store.HeartbeatStore.RunProcessLost), also after a server restart, when
// it re-adopts the processes that still run.
//
// Every scheduler is a server instance with its own id (Config.HostID, a
// fresh one per process) and a lease row in the database, renewed every
// pass; the runs it starts carry that id. It only ever judges, renews,
// re-adopts or kills the processes of its own runs, and takes over those of
// an instance of the same machine whose lease ended or whose server process
// is gone (a restart, or a crashed replica): it re-adopts their live
// processes and kills those that outlived their runs. A process never
// outlives its run: when a run of this instance ends by any path (finish,
// cancel from any replica, agent terminated, lease expired), the next pass
// stops it (terminate), and the run's shim, a child subreaper, ends its
// whole process tree, also the descendants that left its process group or
// session (shim.go); what a killed shim leaves is killed by uid and
// environment once the run has ended (endStrays). With Config.AgentUIDs
// each agent runs as a uid of its own (uid.go). All decisions are the
// store's conditional statements. Only internal/cli wires it.
package heartbeat

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/clasp-dev/clasp"
	"github.com/clasp-dev/clasp/internal/store"
)

// Config configures a Scheduler.
type Config struct {
	// HostID is this instance's id, kept in runs.host_id of the runs it
	// starts or takes over, and its row in the instances table. Default a
	// fresh id per scheduler (NewInstanceID): a restarted server takes its
	// predecessor's runs over as those of a dead instance of its machine.
	HostID string
	// Machine names the machine (instances of one machine can check each
	// other's processes by pid). Default DefaultHostID().
	Machine string
	// APIURL is the server's base URL given to agents as CLASP_API_URL.
	APIURL string
	// CACert, when set, is a PEM file of the CA certificates (or the
	// self-signed certificate) that agents need to trust APIURL over
	// https://. It is given to them as CLASP_CA_CERT (read by the clasp
	// CLI and Go client) and NODE_EXTRA_CA_CERTS (read by Node agents),
	// before the adapter's env, which may set either itself. "" gives
	// neither.
	CACert string
	// NewRunToken returns a new run token and its hash (httpapi.NewToken("rt")).
	NewRunToken func() (token, hash string)
	// LeaseTTL is the lease of a started run, renewed every LeaseTTL/3
	// while its process lives. Default 60 s.
	LeaseTTL time.Duration
	// Interval is the time between scheduler passes (timer and assignment
	// wakes, starting queued runs, process-loss checks). Default 1 s;
	// Nudge runs a pass at once.
	Interval time.Duration
	// LogDir holds the run logs (<runId>.log). Default os.TempDir()/clasp-run-logs.
	LogDir string
	// MaxLogBytes caps a run log. Default DefaultMaxLogBytes.
	MaxLogBytes int64
	// KillGrace is the time between SIGTERM and SIGKILL of a run's process
	// group on timeout or cancel (see terminate); the shim gives the
	// descendants left when the command exits half of it. Default 5 s.
	KillGrace time.Duration
	// WorkDir holds the working directories of runs whose adapter sets no
	// cwd (<WorkDir>/<runId>, see Scheduler.runDir). Default
	// os.TempDir()/clasp-run-work.
	WorkDir string
	// AgentUser, when set, is the account run processes start as (the
	// server must then run as root); nil: the server's own. Unused with
	// AgentUIDs.
	AgentUser *AgentUser
	// AgentUIDs, when set, gives each agent a uid of its own from this
	// range (the server must then run as root): its run processes start
	// as that uid, with the gid of the same number and no supplementary
	// groups, HOME its own directory under HomeDir (see agentUID,
	// agentHome).
	AgentUIDs *UIDRange
	// HomeDir holds the agents' home directories with AgentUIDs
	// (<HomeDir>/<agentId>). Default os.TempDir()/clasp-agent-homes.
	HomeDir string
	// Logger, default slog.Default().
	Logger *slog.Logger
}

// DefaultHostID is the machine's host name and boot id: stable across
// server restarts, different after a reboot (when pids mean nothing).
func DefaultHostID() string {
	h, _ := os.Hostname()
	b, _ := os.ReadFile("/proc/sys/kernel/random/boot_id")
	return cmp.Or(h, "localhost") + "/" + strings.TrimSpace(string(b))
}

// NewInstanceID returns a new instance id: the host name and 12 random
// hex digits.
func NewInstanceID() string {
	h, _ := os.Hostname()
	var b [6]byte
	_, _ = rand.Read(b[:])
	return cmp.Or(h, "localhost") + "/" + hex.EncodeToString(b[:])
}

// Scheduler is the heartbeat loop. Build it with New; Start and Stop it once.
type Scheduler struct {
	st  store.HeartbeatStore
	cfg Config
	log *slog.Logger

	nudge chan struct{}
	// afterPass, when set before Start, is called after each pass of the
	// loop (tests wait for the first one before driving passes themselves).
	afterPass func()

	mu       sync.Mutex
	procs    map[string]*proc     // runs whose process this scheduler watches
	lastWake map[string]time.Time // timer wakes, by agent
	uids     map[string]uint32    // agents' uids in Config.AgentUIDs (agentUID), by agent
	cancel   context.CancelFunc
	done     chan struct{}
	wg       sync.WaitGroup
	started  bool
}

// proc is a watched run: a child started here, or a process re-adopted
// after a restart (adopted: not our child, polled instead of waited for).
type proc struct {
	run      *clasp.Run
	pid      int
	start    int64
	adopted  bool
	stopping chan clasp.RunStatus // cancel or timeout: the status to end with; runEnded: stop, do not end
	once     sync.Once
	ctx      context.Context // ends when the scheduler stops or hands the run over: the watcher leaves the process alone
	release  context.CancelFunc
}

// runEnded is the stop of a process whose run already ended (or lost its
// lease) elsewhere: the process group is stopped, the run left as it is.
const runEnded clasp.RunStatus = "ended"

func (p *proc) stop(st clasp.RunStatus) {
	p.once.Do(func() { p.stopping <- st })
}

// New returns a scheduler over st.
func New(st store.HeartbeatStore, cfg Config) *Scheduler {
	if cfg.HostID == "" {
		cfg.HostID = NewInstanceID()
	}
	if cfg.Machine == "" {
		cfg.Machine = DefaultHostID()
	}
	cfg.LeaseTTL = cmp.Or(cfg.LeaseTTL, 60*time.Second)
	cfg.Interval = cmp.Or(cfg.Interval, time.Second)
	cfg.LogDir = cmp.Or(cfg.LogDir, os.TempDir()+"/clasp-run-logs")
	cfg.MaxLogBytes = cmp.Or(cfg.MaxLogBytes, DefaultMaxLogBytes)
	cfg.KillGrace = cmp.Or(cfg.KillGrace, 5*time.Second)
	cfg.WorkDir = cmp.Or(cfg.WorkDir, os.TempDir()+"/clasp-run-work")
	cfg.HomeDir = cmp.Or(cfg.HomeDir, os.TempDir()+"/clasp-agent-homes")
	if abs, err := filepath.Abs(cfg.HomeDir); err == nil {
		cfg.HomeDir = abs // HOME must not depend on the run's working directory
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	return &Scheduler{st: st, cfg: cfg, log: cfg.Logger, nudge: make(chan struct{}, 1),
		procs: map[string]*proc{}, lastWake: map[string]time.Time{}, uids: map[string]uint32{}}
}

// HostID is this instance's id, the host id runs started here carry.
func (s *Scheduler) HostID() string { return s.cfg.HostID }

// LogDir is the directory of the run logs.
func (s *Scheduler) LogDir() string { return s.cfg.LogDir }

// Nudge asks for a pass at once (a wake was queued); it never blocks.
func (s *Scheduler) Nudge() {
	select {
	case s.nudge <- struct{}{}:
	default:
	}
}

// Start recovers this host's running runs (re-adopting live processes,
// failing dead ones with process_lost) and starts the loop. It returns an
// error if it was started already or the recovery pass failed to read.
func (s *Scheduler) Start(ctx context.Context) error {
	s.mu.Lock()
	if s.started {
		s.mu.Unlock()
		return errors.New("heartbeat: scheduler already started")
	}
	s.started = true
	ctx, s.cancel = context.WithCancel(ctx)
	s.done = make(chan struct{})
	s.mu.Unlock()
	err := s.register(ctx)
	if err == nil {
		err = s.checkHost(ctx)
	}
	if err != nil {
		s.cancel()
		close(s.done)
		return err
	}
	go s.loop(ctx)
	return nil
}

// Stop stops the loop and the watchers, waits for them, and ends this
// instance's lease. The agent processes keep running: another instance of
// this machine takes them over (re-adopts them), or their leases expire.
func (s *Scheduler) Stop() {
	s.mu.Lock()
	cancel, done := s.cancel, s.done
	s.mu.Unlock()
	if cancel == nil {
		return
	}
	cancel()
	<-done
	s.wg.Wait()
	ctx, stop := context.WithTimeout(context.Background(), 5*time.Second)
	defer stop()
	if err := s.st.InstanceRelease(ctx, s.cfg.HostID); err != nil {
		s.log.Warn("heartbeat: release instance", "instance", s.cfg.HostID, "err", err)
	}
}

// register records this instance (its id, machine, pid and start time)
// with a lease of LeaseTTL.
func (s *Scheduler) register(ctx context.Context) error {
	pid := os.Getpid()
	start, _ := ProcStart(pid)
	return s.st.InstanceRegister(ctx, &store.Instance{ID: s.cfg.HostID, Host: s.cfg.Machine, PID: pid, ProcStart: start}, s.cfg.LeaseTTL)
}

// renewInstance renews this instance's lease. When another instance took
// this one over (its lease had run out: the server stalled), the runs are
// that instance's now: every watcher here lets go of its process without
// touching it, and the instance registers again.
//
// The renewal is not cut short by Stop: a statement abandoned on a
// cancelled context may still commit on a PostgreSQL server after Stop has
// ended the lease, and hand the stopped instance a whole lease again (its
// successor would then wait that long to take it over). It is bounded by
// its own timeout instead, and Stop waits for it.
func (s *Scheduler) renewInstance(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	err := s.st.InstanceRenew(ctx, s.cfg.HostID, s.cfg.LeaseTTL)
	if clasp.ErrorCode(err) != clasp.CodeNotFound {
		return err
	}
	s.log.Warn("heartbeat: this instance was taken over; letting its processes go", "instance", s.cfg.HostID)
	s.mu.Lock()
	for id, p := range s.procs {
		p.release()
		delete(s.procs, id)
	}
	s.mu.Unlock()
	return s.register(ctx)
}

// takeOver takes over the instances of this machine whose lease ended or
// whose server process is gone: their running runs become this instance's
// (checkHost then re-adopts or judges them), and a process that outlived
// its ended run is stopped.
func (s *Scheduler) takeOver(ctx context.Context) error {
	ins, err := s.st.InstanceList(ctx, s.cfg.Machine)
	if err != nil {
		return err
	}
	for _, in := range ins {
		if in.ID == s.cfg.HostID || (!in.Expired && Alive(in.PID, in.ProcStart)) {
			continue
		}
		runs, ok, err := s.st.InstanceTakeOver(ctx, in, s.cfg.HostID)
		if err != nil {
			return err
		}
		if !ok {
			continue // another instance took it over, or it renewed
		}
		s.log.Info("heartbeat: took over instance", "instance", in.ID, "runs", len(runs))
		for _, m := range runs {
			pid := 0
			if m.Run.PID != nil {
				pid = *m.Run.PID
			}
			if !m.Run.Status.Terminal() || !Alive(pid, m.ProcStart) {
				continue
			}
			s.log.Warn("heartbeat: stopping a process that outlived its run", "run", m.Run.ID, "status", m.Run.Status, "pid", pid)
			start, run := m.ProcStart, m.Run
			s.wg.Add(1)
			go func() {
				defer s.wg.Done()
				s.terminate(pid, func() bool { return Alive(pid, start) })
				s.removeRunDir(run.ID)
				s.removeStatus(run.ID)
				s.endStrays(context.WithoutCancel(ctx), run)
			}()
		}
	}
	return nil
}

func (s *Scheduler) loop(ctx context.Context) {
	defer close(s.done)
	t := time.NewTicker(s.cfg.Interval)
	defer t.Stop()
	for {
		s.RunOnce(ctx)
		if s.afterPass != nil {
			s.afterPass()
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-s.nudge:
		}
	}
}

// RunOnce is one pass: process-loss check, deferred-wake catch-all, timer
// and assignment wakes, then starting queued runs. Errors are logged.
func (s *Scheduler) RunOnce(ctx context.Context) {
	if err := s.renewInstance(ctx); err != nil && ctx.Err() == nil {
		s.log.Error("heartbeat: renew instance", "err", err)
	}
	if err := s.takeOver(ctx); err != nil && ctx.Err() == nil {
		s.log.Error("heartbeat: take over instances", "err", err)
	}
	if err := s.checkHost(ctx); err != nil && ctx.Err() == nil {
		s.log.Error("heartbeat: process check", "err", err)
	}
	if _, err := s.st.WakePromoteDeferred(ctx); err != nil && ctx.Err() == nil {
		s.log.Error("heartbeat: promote deferred wakes", "err", err)
	}
	adapters, err := s.st.AgentAdapterList(ctx)
	if err != nil {
		if ctx.Err() == nil {
			s.log.Error("heartbeat: list agents", "err", err)
		}
		return
	}
	cfgs := map[string]*clasp.AdapterConfig{}
	for _, aa := range adapters {
		cfgs[aa.Agent.ID] = aa.Config
		if aa.Agent.Status != clasp.AgentActive || !aa.Config.Heartbeat.Enabled {
			continue
		}
		s.timerWake(ctx, aa)
		if aa.Config.Heartbeat.WakeOnAssignment {
			s.assignmentWakes(ctx, aa)
		}
	}
	queued, err := s.st.RunQueuedManaged(ctx, 200)
	if err != nil {
		if ctx.Err() == nil {
			s.log.Error("heartbeat: list queued runs", "err", err)
		}
		return
	}
	for _, m := range queued {
		if c := cfgs[m.Run.AgentID]; c != nil {
			s.startRun(ctx, m.Run, c)
		}
	}
}

// timerWake wakes an agent every intervalSec. The idempotency key is the
// interval's number, so replicas sharing a database wake it once.
func (s *Scheduler) timerWake(ctx context.Context, aa *store.AgentAdapter) {
	iv := time.Duration(aa.Config.Heartbeat.IntervalSec) * time.Second
	if iv <= 0 {
		return
	}
	now := time.Now()
	s.mu.Lock()
	last := s.lastWake[aa.Agent.ID]
	due := now.Sub(last) >= iv
	if due {
		s.lastWake[aa.Agent.ID] = now
	}
	s.mu.Unlock()
	if !due {
		return
	}
	key := fmt.Sprintf("timer:%d", now.UnixNano()/int64(iv))
	if _, err := s.st.Wake(ctx, &store.WakeParams{AgentID: aa.Agent.ID, Reason: clasp.InvocationTimer, IdempotencyKey: key,
		Actor: store.Actor{Type: clasp.ActorSystem}}); err != nil && ctx.Err() == nil {
		s.log.Error("heartbeat: timer wake", "agent", aa.Agent.ID, "err", err)
	}
}

// assignmentWakes wakes an agent for each unlocked todo issue assigned to
// it; the key (issue and its updatedAt) wakes it once per assignment state.
func (s *Scheduler) assignmentWakes(ctx context.Context, aa *store.AgentAdapter) {
	inbox, err := s.st.IssueInbox(ctx, aa.Agent.ID)
	if err != nil {
		return
	}
	for _, it := range inbox {
		if it.Status != clasp.IssueTodo || it.ActiveRun != nil {
			continue
		}
		key := fmt.Sprintf("assign:%s:%d", it.ID, it.UpdatedAt.UnixMicro())
		if _, err := s.st.Wake(ctx, &store.WakeParams{AgentID: aa.Agent.ID, Reason: clasp.InvocationAssignment, IssueID: it.ID,
			IdempotencyKey: key, Actor: store.Actor{Type: clasp.ActorSystem}}); err != nil && ctx.Err() == nil {
			s.log.Error("heartbeat: assignment wake", "agent", aa.Agent.ID, "issue", it.ID, "err", err)
		}
	}
}

// checkHost compares this instance's running managed runs with the
// processes: a run not watched here whose process is alive (same pid and
// start time) is re-adopted; one whose process is gone ends by the exit
// status its shim recorded (endByStatus), or without one is failed with
// process_lost (and retried once, by the store); one whose pid is not
// recorded yet is left to its lease (its process may have started). A
// watched process whose run is no longer running here (it ended by any
// path, or lost its lease) is stopped.
func (s *Scheduler) checkHost(ctx context.Context) error {
	// The watched set is read before the runs: a run started after this
	// read is not judged in this pass.
	s.mu.Lock()
	watchedBefore := make(map[string]*proc, len(s.procs))
	for id, p := range s.procs {
		watchedBefore[id] = p
	}
	s.mu.Unlock()
	runs, err := s.st.RunRunningOnHost(ctx, s.cfg.HostID)
	if err != nil {
		return err
	}
	running := make(map[string]bool, len(runs))
	for _, m := range runs {
		running[m.Run.ID] = true
	}
	for id, p := range watchedBefore {
		if !running[id] {
			p.stop(runEnded)
		}
	}
	for _, m := range runs {
		s.mu.Lock()
		_, watched := s.procs[m.Run.ID]
		s.mu.Unlock()
		if watched || m.Run.PID == nil {
			continue
		}
		pid := *m.Run.PID
		if Alive(pid, m.ProcStart) {
			s.adopt(ctx, m.Run, pid, m.ProcStart)
			continue
		}
		// The status file goes once the run is ended by it: a pass whose
		// statement failed finds it again.
		if es, ok := readStatus(s.cfg.LogDir, m.Run.ID); ok {
			s.endByStatus(ctx, m.Run.ID, es)
			s.removeStatus(m.Run.ID)
		} else {
			s.lost(ctx, m.Run.ID, fmt.Sprintf("process lost: pid %d is gone", pid))
		}
		s.endStrays(ctx, m.Run)
	}
	return nil
}

func (s *Scheduler) lost(ctx context.Context, runID, msg string) {
	_, retry, err := s.st.RunProcessLost(ctx, &store.RunProcessLostParams{RunID: runID, HostID: s.cfg.HostID, Error: msg})
	switch {
	case err != nil && clasp.ErrorCode(err) != clasp.CodeRunNotLive && ctx.Err() == nil:
		s.log.Error("heartbeat: process lost", "run", runID, "err", err)
	case err == nil:
		s.log.Warn("heartbeat: run's process lost", "run", runID, "retry", retry != nil)
		s.Nudge()
	}
}

// adopt watches a live process of this host's run that this scheduler did
// not start (after a restart): its lease is renewed while the pid (with
// its start time) lives; when it is gone the run ends by the exit status
// its shim recorded (endByStatus), or is lost when there is none (the
// shim was killed).
func (s *Scheduler) adopt(ctx context.Context, run *clasp.Run, pid int, start int64) {
	p := newProc(ctx, run)
	p.pid, p.start, p.adopted = pid, start, true
	if !s.track(p) {
		p.release()
		return
	}
	ctx = p.ctx
	s.log.Info("heartbeat: re-adopted run", "run", run.ID, "pid", pid)
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		defer s.untrack(p)
		poll := time.NewTicker(min(s.cfg.Interval, 200*time.Millisecond))
		defer poll.Stop()
		renew := time.NewTicker(s.cfg.LeaseTTL / 3)
		defer renew.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case st := <-p.stopping:
				s.terminate(pid, func() bool { return Alive(pid, start) })
				s.removeRunDir(run.ID)
				s.removeStatus(run.ID)
				if st != runEnded {
					s.finish(context.WithoutCancel(ctx), run.ID, st, nil, "")
				}
				s.endStrays(context.WithoutCancel(ctx), run)
				return
			case <-renew.C:
				if err := s.st.RunRenew(ctx, run.ID, s.cfg.HostID, s.cfg.LeaseTTL); clasp.ErrorCode(err) == clasp.CodeRunNotLive {
					// Ended by someone else (the agent finished it, it was
					// cancelled or terminated) or its lease ran out: the
					// process must not outlive it.
					p.stop(runEnded)
				}
			case <-poll.C:
				if !Alive(pid, start) {
					_ = signalGroup(pid, syscall.SIGKILL)
					s.removeRunDir(run.ID)
					if es, ok := readStatus(s.cfg.LogDir, run.ID); ok {
						s.endByStatus(context.WithoutCancel(ctx), run.ID, es)
						s.removeStatus(run.ID)
					} else {
						s.lost(context.WithoutCancel(ctx), run.ID, fmt.Sprintf("process lost: re-adopted pid %d is gone", pid))
					}
					s.endStrays(context.WithoutCancel(ctx), run)
					return
				}
			}
		}
	}()
}

func (s *Scheduler) track(p *proc) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.procs[p.run.ID]; ok {
		return false
	}
	s.procs[p.run.ID] = p
	return true
}

// untrack forgets p (if it is still the watched proc of its run).
func (s *Scheduler) untrack(p *proc) {
	s.mu.Lock()
	if s.procs[p.run.ID] == p {
		delete(s.procs, p.run.ID)
	}
	s.mu.Unlock()
	p.release()
}

// newProc returns a proc for run whose context ends with ctx or its release.
func newProc(ctx context.Context, run *clasp.Run) *proc {
	p := &proc{run: run, stopping: make(chan clasp.RunStatus, 1)}
	p.ctx, p.release = context.WithCancel(ctx)
	return p
}

// Cancel ends a run watched here: SIGTERM to its process group, SIGKILL
// after KillGrace, then the run is cancelled. ok is false when no process
// of this scheduler runs it (the caller then finishes it in the store).
func (s *Scheduler) Cancel(runID string) bool {
	s.mu.Lock()
	p := s.procs[runID]
	s.mu.Unlock()
	if p == nil {
		return false
	}
	p.stop(clasp.RunCancelled)
	return true
}

// terminate sends SIGTERM to group pgid, whose leader is a run's shim,
// then, after KillGrace unless alive reports the leader gone and the group
// is empty first, SIGKILL to every other member of the group; it then
// waits up to another KillGrace for the shim, which meanwhile ends the
// descendants that left the group (its endTree takes at most 3/4 of
// KillGrace), before it SIGKILLs the whole group.
func (s *Scheduler) terminate(pgid int, alive func() bool) {
	_ = signalGroup(pgid, syscall.SIGTERM)
	gone := func() bool { return !alive() && !groupAlive(pgid) }
	deadline := time.Now().Add(s.cfg.KillGrace)
	for time.Now().Before(deadline) && !gone() {
		time.Sleep(20 * time.Millisecond)
	}
	if !gone() {
		signalGroupExcept(pgid, pgid, syscall.SIGKILL)
		deadline = time.Now().Add(s.cfg.KillGrace)
		for time.Now().Before(deadline) && !gone() {
			time.Sleep(20 * time.Millisecond)
		}
	}
	_ = signalGroup(pgid, syscall.SIGKILL)
}

// finish ends a run in the store as the system; a run already ended
// (run_not_live: the agent finished it, or it was terminated) is left.
func (s *Scheduler) finish(ctx context.Context, runID string, st clasp.RunStatus, exitCode *int, msg string) {
	s.finishCode(ctx, runID, st, exitCode, msg, "")
}

// finishCode is finish with the run's errorCode (code "": none).
func (s *Scheduler) finishCode(ctx context.Context, runID string, st clasp.RunStatus, exitCode *int, msg, code string) {
	var errp, codep *string
	if msg != "" {
		errp = &msg
	}
	if code != "" {
		codep = &code
	}
	_, err := s.st.RunFinish(ctx, &store.RunFinishParams{RunID: runID, Status: st, ExitCode: exitCode, Error: errp, ErrorCode: codep,
		Actor: store.Actor{Type: clasp.ActorSystem}})
	if err != nil && clasp.ErrorCode(err) != clasp.CodeRunNotLive {
		s.log.Error("heartbeat: finish run", "run", runID, "status", st, "err", err)
	}
	s.Nudge()
}
