package swarm

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/clasp-dev/clasp/client"
)

// RunMCP is the loop of `clasp agent work --mcp`: the same work as Run, done
// as an MCP client of a `clasp mcp` process (MCPCommand, started with
// CLASP_URL and CLASP_API_KEY) whose session owns one run. Each turn calls
// claim_next_issue, hashes the file the issue's description names, and
// calls update_issue_status done with the result as comment; it prints the
// same event lines as Run. It ends when two looks in a row find nothing to
// claim and no issue of the agent is held by another live run (a killed
// process's, until its lease runs out), or when ctx ends (the issue in
// hand is completed first); it then closes the server's stdin, which
// finishes the session's run.
//
// The `clasp mcp` process gets SIGKILL when this process dies (its parent
// death signal, from a thread kept alive for the purpose), so a SIGKILL of
// this process kills both and leaves the run to its lease, as with Run.
func (w *Worker) RunMCP(ctx context.Context, mcpCommand []string) error {
	cs, wait, err := w.startMCP(mcpCommand)
	if err != nil {
		w.ev.Emit(EventExit, "reason", "error", "error", err)
		return err
	}
	defer wait()
	err = w.mcpLoop(ctx, cs)
	reason := "no_work"
	switch {
	case err != nil:
		reason = "error"
	case ctx.Err() != nil:
		reason = "signal"
	}
	cerr := cs.Close() // stdin EOF: the server finishes its run
	if err == nil && cerr != nil {
		err = fmt.Errorf("close clasp mcp: %w", cerr)
		reason = "error"
	}
	if err != nil {
		w.ev.Emit(EventExit, "reason", reason, "done", w.done, "conflicts", w.conflicts, "error", err)
		return err
	}
	return w.exit(reason)
}

// startMCP starts the `clasp mcp` process from a goroutine locked to its
// OS thread, which stays alive (and so keeps the parent death signal
// armed) until wait is called after the session closed.
func (w *Worker) startMCP(command []string) (*sdk.ClientSession, func(), error) {
	type started struct {
		cs  *sdk.ClientSession
		err error
	}
	ready := make(chan started, 1)
	release := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		cmd := exec.Command(command[0], command[1:]...) // #nosec G204 -- the worker command the operator passed, run without a shell
		cmd.Env = append(os.Environ(), "CLASP_URL="+w.c.BaseURL(), "CLASP_API_KEY="+w.cfg.Token,
			"CLASP_RUN_ID=", "CLASP_RUN_TOKEN=", "CLASP_API_KEY_FILE=")
		cmd.Stderr = os.Stderr
		setDeathSignal(cmd)
		cs, err := sdk.NewClient(&sdk.Implementation{Name: "clasp-swarm-agent", Version: "1"}, nil).
			Connect(context.Background(), &sdk.CommandTransport{Command: cmd, TerminateDuration: 10 * time.Second}, nil)
		ready <- started{cs, err}
		if err != nil {
			return
		}
		<-release
	}()
	s := <-ready
	if s.err != nil {
		<-done
		return nil, nil, fmt.Errorf("start %s: %w", strings.Join(command, " "), s.err)
	}
	return s.cs, func() { close(release); <-done }, nil
}

// mcpAnswer is the part of a tool answer the loop reads.
type mcpAnswer struct {
	isError bool
	Outcome string `json:"outcome"`
	Message string `json:"message"`
	Issue   *struct {
		Identifier  string `json:"identifier"`
		ID          string `json:"id"`
		Description string `json:"description"`
		Status      string `json:"status"`
	} `json:"issue"`
	Issues []struct {
		Identifier  string `json:"identifier"`
		Status      string `json:"status"`
		HeldByOther string `json:"heldByRun"`
	} `json:"issues"`
	RunID         string `json:"runId"`
	CheckoutEpoch int64  `json:"checkoutEpoch"`
	Agent         string `json:"agent"`
	AgentID       string `json:"agentId"`
	Reason        string `json:"reason"`
	Error         *struct {
		Code      string `json:"code"`
		Retryable bool   `json:"retryable"`
	} `json:"error"`
}

// callTool calls a tool and decodes its structured answer. Answers marked
// retryable (the clasp server unreachable or busy) are retried with backoff
// for up to ConnRetry.
func (w *Worker) callTool(ctx context.Context, cs *sdk.ClientSession, name string, args map[string]any) (*mcpAnswer, error) {
	b := client.Backoff{Initial: 50 * time.Millisecond, Max: 2 * time.Second}
	deadline := time.Now().Add(w.cfg.ConnRetry)
	for n := 0; ; n++ {
		res, err := cs.CallTool(ctx, &sdk.CallToolParams{Name: name, Arguments: args})
		if err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		raw, err := json.Marshal(res.StructuredContent)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		a := &mcpAnswer{isError: res.IsError}
		if err := json.Unmarshal(raw, a); err != nil || a.Outcome == "" {
			return nil, fmt.Errorf("%s: answer without outcome: %s", name, raw)
		}
		if !a.isError || a.Error == nil || !a.Error.Retryable || time.Now().After(deadline) || ctx.Err() != nil {
			return a, nil
		}
		w.log.Warn("tool answer says retry", "tool", name, "message", a.Message)
		if !sleepCtx(ctx, b.Delay(n)) {
			return a, nil
		}
	}
}

// mcpLoop claims and works issues until there is nothing left or ctx ends.
func (w *Worker) mcpLoop(ctx context.Context, cs *sdk.ClientSession) error {
	st, err := w.callTool(ctx, cs, "session_status", nil)
	if err != nil {
		return err
	}
	if st.isError {
		return fmt.Errorf("session_status: %s", st.Message)
	}
	w.ev.Emit(EventStarted, "agent", st.AgentID, "name", st.Agent, "pid", os.Getpid())
	lastRun := ""
	empty := 0
	waiting := map[string]bool{}
	for ctx.Err() == nil {
		c, err := w.callTool(ctx, cs, "claim_next_issue", nil)
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
		switch {
		case c.Outcome == "claimed" && c.Issue != nil:
			empty = 0
			if c.RunID != lastRun {
				lastRun = c.RunID
				w.ev.Emit(EventRunOpened, "run", c.RunID)
			}
			w.ev.Emit(EventCheckedOut, "issue", c.Issue.Identifier, "run", c.RunID, "epoch", c.CheckoutEpoch, "from", "mcp")
			if err := w.mcpWork(context.WithoutCancel(ctx), cs, c); err != nil {
				return err
			}
			continue
		case c.Outcome == "run_lost":
			w.ev.Emit(EventRunLost, "run", lastRun, "error", c.Message)
			continue
		case c.isError:
			return fmt.Errorf("claim_next_issue: %s", c.Message)
		}
		// none_available: wait while an issue of ours is held by a dead
		// process's live lease (the claim takes it once the lease ran out).
		l, err := w.callTool(ctx, cs, "list_my_issues", nil)
		if err != nil {
			return err
		}
		held := false
		for _, it := range l.Issues {
			if it.Status == "in_progress" && it.HeldByOther != "" {
				held = true
				if !waiting[it.Identifier] {
					waiting[it.Identifier] = true
					w.ev.Emit(EventWaiting, "issue", it.Identifier, "run", lastRun)
				}
			}
		}
		if held {
			empty = 0
		} else if empty++; empty >= 2 {
			return nil
		}
		if !sleepCtx(ctx, w.cfg.IdlePause) {
			return nil
		}
	}
	return nil
}

// mcpWork hashes the claimed issue's file and sets it done with the result
// in one update_issue_status call (one atomic PATCH on the server). When the
// file cannot be read it sets the issue blocked instead, with a
// FailurePrefix comment saying why (the same call releases the lock).
func (w *Worker) mcpWork(ctx context.Context, cs *sdk.ClientSession, c *mcpAnswer) error {
	sum, herr := HashFile(ctx, c.Issue.Description, w.cfg.Slow)
	status, result := "done", ResultPrefix+sum
	if herr != nil {
		w.log.Warn("cannot hash the issue's file; setting the issue blocked", "issue", c.Issue.Identifier, "err", herr)
		status, result = "blocked", FailurePrefix+herr.Error()
	}
	d, err := w.callTool(ctx, cs, "update_issue_status", map[string]any{"issue": c.Issue.ID, "status": status, "comment": result})
	if err != nil {
		return err
	}
	switch {
	case !d.isError && herr != nil:
		w.blocked = append(w.blocked, c.Issue.Identifier)
		w.ev.Emit(EventBlocked, "issue", c.Issue.Identifier, "run", c.RunID, "error", herr)
	case !d.isError:
		w.done++
		w.ev.Emit(EventDone, "issue", c.Issue.Identifier, "run", c.RunID, "epoch", c.CheckoutEpoch, "sha256", strings.TrimPrefix(result, ResultPrefix))
	case d.Outcome == "ownership_lost":
		w.ev.Emit(EventLockLost, "issue", c.Issue.Identifier, "run", c.RunID, "code", "ownership_conflict")
	case d.Outcome == "run_lost":
		w.ev.Emit(EventRunLost, "issue", c.Issue.Identifier, "run", c.RunID, "error", d.Message)
	default:
		return errors.New("update_issue_status: " + d.Message)
	}
	return nil
}
