package swarm

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"slices"
	"sync"
	"syscall"
	"time"

	"github.com/clasp-dev/clasp"
	"github.com/clasp-dev/clasp/client"
)

// managedPoll is how often a managed swarm looks at the running runs (to
// count and kill their processes) and wakes the agents.
const managedPoll = 50 * time.Millisecond

// managedRunTimeout bounds one server-managed run of the swarm's agents
// (their adapter's timeoutSec): past it the server ends the process.
const managedRunTimeout = 120 * time.Second

// managedSlow is the default Slow of a managed swarm: the work of an issue
// lasts long enough for a kill to land while the process holds it.
const managedSlow = 100 * time.Millisecond

// runManaged is the work phase of a managed swarm (Config.Managed):
// the server runs the agents. Each agent gets a process adapter
// whose process is `<AgentCommand> --one-run` (one issue per run, with the
// run's token), timer wakes every second and one run at a time; the swarm
// also wakes every agent on demand every managedPoll (coalesced into the
// queued run when it has one) until no issue is left todo or in progress.
// A run seen running whose pid is known is SIGKILLed with probability
// KillRate at a random moment within Slow: the server's process-loss
// handling (failed process_lost, one retry holding the issue's execution
// lock) must carry the work on. At the end the heartbeats are disabled so
// that no new run is queued; the caller waits for the live runs to end.
func (s *supervisor) runManaged(ctx context.Context, board *client.Client, companyID string, progress io.Writer) {
	s.start = time.Now()
	agents, err := s.setUpManaged(ctx, board, companyID)
	if err != nil {
		s.fail(err.Error())
		return
	}
	defer s.disableManaged(context.WithoutCancel(ctx), board, agents)

	seen := map[string]bool{}          // runs counted (and maybe doomed)
	killedAt := map[string]time.Time{} // run id → when the swarm SIGKILLed its process
	recovered := map[string]bool{}     // killed runs whose retry was seen running
	var kmu sync.Mutex                 // killedAt is written by the kill timers
	var timers []*time.Timer
	defer func() {
		for _, t := range timers {
			t.Stop()
		}
	}()
	lastProgress := time.Now()
	wakeRound := 0
	for ctx.Err() == nil {
		page, err := board.RunList(ctx, companyID, client.RunListParams{Statuses: []clasp.RunStatus{clasp.RunRunning}, Limit: 1000})
		if err == nil {
			live := 0
			for _, r := range page.Items {
				if r.PID == nil {
					continue
				}
				live++
				if r.RetryOfRunID != nil && !recovered[*r.RetryOfRunID] {
					kmu.Lock()
					at, ok := killedAt[*r.RetryOfRunID]
					kmu.Unlock()
					if ok && r.StartedAt != nil {
						recovered[*r.RetryOfRunID] = true
						s.mu.Lock()
						s.recovery = append(s.recovery, r.StartedAt.Sub(at))
						s.mu.Unlock()
					}
				}
				if seen[r.ID] {
					continue
				}
				seen[r.ID] = true
				s.mu.Lock()
				s.started++
				s.mu.Unlock()
				if s.cfg.KillRate > 0 && rand.Float64() < s.cfg.KillRate { // #nosec G404 -- fault injection (which agents to kill), not a secret
					pid, id := *r.PID, r.ID
					timers = append(timers, time.AfterFunc(rand.N(max(s.cfg.Slow, time.Millisecond)), func() { // #nosec G404 -- fault injection delay, not a secret
						// The process leads its own group (the scheduler
						// spawns it with Setpgid): kill the group, as a
						// crash of the whole agent would.
						if syscall.Kill(-pid, syscall.SIGKILL) == nil {
							kmu.Lock()
							killedAt[id] = time.Now()
							kmu.Unlock()
							s.mu.Lock()
							s.kills++
							s.mu.Unlock()
						}
					}))
				}
			}
			s.mu.Lock()
			s.live = live
			s.mu.Unlock()
		}
		open, err := board.IssueList(ctx, companyID, client.IssueListParams{Statuses: []clasp.IssueStatus{clasp.IssueTodo, clasp.IssueInProgress}, Limit: 1})
		if err == nil && len(open.Items) == 0 {
			break
		}
		wakeRound++
		for _, id := range agents {
			// A wake whose answer is lost with a killed replica is sent again
			// (to the next replica) under the same key: the repeat answers the
			// first wake instead of queueing a second run, or failing the swarm.
			wctx := client.WithIdempotencyKey(ctx, fmt.Sprintf("swarm-wake-%s-%d", id, wakeRound))
			if _, err := board.AgentWake(wctx, id, client.WakeRequest{Reason: clasp.InvocationOnDemand}); err != nil && ctx.Err() == nil {
				s.fail(fmt.Sprintf("wake agent %s: %v", id, err))
			}
		}
		if time.Since(lastProgress) >= time.Second {
			lastProgress = time.Now()
			fmt.Fprintln(progress, s.progressLine(ctx))
		}
		sleepCtx(ctx, managedPoll)
	}
	fmt.Fprintln(progress, s.progressLine(ctx))
}

// setUpManaged gives every agent of the company a process adapter running
// AgentCommand --one-run (and --slow), or ManagedCommand as it is, and
// returns their ids.
func (s *supervisor) setUpManaged(ctx context.Context, board *client.Client, companyID string) ([]string, error) {
	page, err := board.AgentList(ctx, companyID, client.ListParams{Limit: 1000})
	if err != nil {
		return nil, fmt.Errorf("list agents: %w", err)
	}
	args := append(slices.Clone(s.cfg.AgentCommand[1:]), "--one-run")
	if s.cfg.Slow > 0 {
		args = append(args, "--slow", s.cfg.Slow.String())
	}
	command := s.cfg.AgentCommand[0]
	if mc := s.cfg.ManagedCommand; len(mc) > 0 {
		command, args = mc[0], mc[1:]
	}
	var ids []string
	for _, a := range page.Items {
		cfg := &clasp.AdapterConfig{Type: clasp.AdapterProcess, Command: command, Args: args,
			// --one-run takes the run's credentials (CLASP_API_*), never
			// the CLASP_URL or CLASP_TOKEN of the server's environment.
			TimeoutSec: int(managedRunTimeout / time.Second),
			Heartbeat:  clasp.HeartbeatConfig{Enabled: true, IntervalSec: 1, MaxConcurrentRuns: 1}}
		if _, err := board.AgentSetAdapter(ctx, a.ID, cfg); err != nil {
			return nil, fmt.Errorf("set adapter of agent %s: %w", a.Name, err)
		}
		ids = append(ids, a.ID)
	}
	return ids, nil
}

// disableManaged turns the agents' heartbeats off (no more timer or
// on-demand wakes), so that the runs drain.
func (s *supervisor) disableManaged(ctx context.Context, board *client.Client, agents []string) {
	for _, id := range agents {
		a, err := board.AgentAdapter(ctx, id)
		if err != nil || a.Adapter == nil {
			continue
		}
		c := a.Adapter
		c.Heartbeat.Enabled = false
		if _, err := board.AgentSetAdapter(ctx, id, c); err != nil {
			s.fail(fmt.Sprintf("disable heartbeat of agent %s: %v", id, err))
		}
	}
}

// percentile is the p-th percentile (0..100, nearest rank) of ds, 0 when empty.
func percentile(ds []time.Duration, p float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	i := int(float64(len(s))*p/100+0.5) - 1
	return s[min(max(i, 0), len(s)-1)]
}
