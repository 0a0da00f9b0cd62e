package heartbeat

import (
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// A run's process is a shim: this same binary (/proc/self/exe) started
// with argv[1] shimArg, leading the run's process group. It starts the
// adapter's command, copies the command's stdout and stderr into the run
// log (masked and capped, cappedLog) and, once the command has exited and
// every process the command started is gone (endTree), writes its exit
// status to the run's status file. Both files are opened by the server
// and inherited (fds 3 and 4), so the shim writes them as the agent user
// too. The output pipe's read end is the shim's, not the server's: a
// server that dies (kill -9) or restarts leaves the command writing its
// output, and the server that re-adopts the run reads the command's real
// exit status from the status file.
//
// The shim is a child subreaper (becomeSubreaper): a descendant that
// leaves the process group or the session (setsid), or whose parent exits
// (a double fork, nohup), stays its descendant, so the whole tree ends
// with the run, not only the group. Only a shim that is itself killed
// (SIGKILL) leaves its descendants to init; with per-agent uids the
// scheduler then ends them by uid (Scheduler.endAgentStrays).
const shimArg = "__clasp-run-shim"

// Fds of the run log and the status file in the shim (cmd.ExtraFiles).
const (
	shimLogFd    = 3
	shimStatusFd = 4
)

// Shim exit codes of its own failures (the status file says why).
const (
	shimUsage     = 2
	shimSpawnFail = 127
)

func init() {
	if len(os.Args) > 1 && os.Args[1] == shimArg {
		os.Exit(shimMain(os.Args[2:]))
	}
}

// shimArgs is the argv of the shim of a command: the log cap, the kill
// grace in milliseconds, the command's resolved path, then its argv
// (argv[0] as the adapter gave it).
func shimArgs(maxLog int64, grace time.Duration, path string, argv []string) []string {
	return append([]string{shimArg, strconv.FormatInt(maxLog, 10), strconv.FormatInt(grace.Milliseconds(), 10), path}, argv...)
}

// shimMain is the shim: args are the log cap, the kill grace (ms), the
// command's path and its argv; fd 3 is the run log (append-only), fd 4
// the status file. The command inherits the shim's environment, working
// directory and process group, but neither fd. SIGTERM, SIGINT and SIGHUP
// (sent to the group) do not stop the shim: it outlives the command to
// record how it ended, and passes SIGTERM on to its descendants outside
// the group. Once the command has exited, the shim ends every descendant
// left (SIGTERM, SIGKILL after half the kill grace; see endTree), so that
// the server, which signals the group after the same grace, finds the
// shim done. It returns the command's exit code (128+n for signal n), or
// shimUsage or shimSpawnFail for its own failures.
func shimMain(args []string) int {
	// Before any child exists: orphans re-parent to the shim from now on. A
	// kernel without subreapers (before 3.4) refuses: endTree then finds
	// only the descendants whose parents still live, and the server stops
	// the group after the shim.
	_ = becomeSubreaper()
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP)
	logf, statf := os.NewFile(shimLogFd, "run-log"), os.NewFile(shimStatusFd, "run-status")
	if _, err := logf.Stat(); err != nil {
		fmt.Fprintln(os.Stderr, "clasp: the run shim is started by the server only")
		return shimUsage
	}
	if _, err := statf.Stat(); err != nil {
		fmt.Fprintln(os.Stderr, "clasp: the run shim is started by the server only")
		return shimUsage
	}
	syscall.CloseOnExec(shimLogFd)
	syscall.CloseOnExec(shimStatusFd)
	if len(args) < 4 {
		fmt.Fprintln(statf, "spawn bad shim arguments")
		return shimUsage
	}
	maxLog, err1 := strconv.ParseInt(args[0], 10, 64)
	graceMS, err2 := strconv.ParseInt(args[1], 10, 64)
	if err1 != nil || err2 != nil || graceMS < 0 {
		fmt.Fprintln(statf, "spawn bad shim arguments")
		return shimUsage
	}
	grace := time.Duration(graceMS) * time.Millisecond
	lg := newCappedLog(logf, maxLog)
	if tok := os.Getenv("CLASP_API_KEY"); tok != "" {
		lg.secrets = []string{tok}
	}
	cmd := exec.Command(args[2]) // #nosec G204 G702 -- the agent command the board configured (resolved by the server), run without a shell
	cmd.Args = args[3:]
	cmd.Stdout, cmd.Stderr = lg, lg
	// Wait also waits for the output pipe to close, which a child that
	// outlives the command holds open: the command's remaining output is
	// read for outputDrain at most.
	cmd.WaitDelay = outputDrain
	if err := cmd.Start(); err != nil {
		_ = lg.Close()
		fmt.Fprintln(statf, "spawn "+strings.ReplaceAll(err.Error(), "\n", " "))
		return shimSpawnFail
	}
	// A stop signal reaches the group; the descendants that left it (setsid,
	// setpgid) get it from here.
	pgrp := syscall.Getpgrp()
	go func() {
		for range sigs {
			signalDescendants(syscall.SIGTERM, pgrp)
		}
	}()
	_ = cmd.Wait() // ErrWaitDelay only drops late output: how the command ended is in ProcessState
	// Nothing the command started outlives it.
	endTree(grace/2, grace/4)
	_ = lg.Close()
	if cmd.ProcessState == nil {
		return shimSpawnFail // not waited for: nothing recorded, the run ends by this exit
	}
	ws, _ := cmd.ProcessState.Sys().(syscall.WaitStatus)
	code := ws.ExitStatus()
	line := fmt.Sprintf("exit %d", code)
	if ws.Signaled() {
		code = 128 + int(ws.Signal())
		line = fmt.Sprintf("signal %d", int(ws.Signal()))
	}
	fmt.Fprintln(statf, line)
	_ = statf.Close()
	return code
}

// exitStatus is how a run's command ended, as its shim recorded it: the
// start failed (spawnErr), killed by a signal, or exited with code.
type exitStatus struct {
	spawnErr string
	signaled bool
	signal   syscall.Signal
	code     int
}

// StatusPath is the file of run runID's exit status in dir (the log dir).
func StatusPath(dir, runID string) string {
	return filepath.Join(dir, filepath.Base(runID)+".exit")
}

// openStatus creates (or empties) run runID's status file, for its shim.
func openStatus(dir, runID string) (*os.File, error) {
	f, err := os.OpenFile(StatusPath(dir, runID), os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o600)
	if err != nil {
		return nil, fmt.Errorf("run status file: %w", err)
	}
	return f, nil
}

// readStatus returns the exit status run runID's shim recorded; ok is
// false when there is none (the shim did not end by itself, or the run
// was started without one).
func readStatus(dir, runID string) (es exitStatus, ok bool) {
	b, err := os.ReadFile(StatusPath(dir, runID))
	if err != nil {
		return es, false
	}
	kind, val, _ := strings.Cut(strings.TrimSuffix(string(b), "\n"), " ")
	switch kind {
	case "spawn":
		return exitStatus{spawnErr: val}, val != ""
	case "exit", "signal":
		n, err := strconv.Atoi(val)
		if err != nil {
			return es, false
		}
		if kind == "signal" {
			return exitStatus{signaled: true, signal: syscall.Signal(n)}, true
		}
		return exitStatus{code: n}, true
	}
	return es, false
}

// removeStatus removes run runID's status file, once its run has ended.
func (s *Scheduler) removeStatus(runID string) {
	if err := os.Remove(StatusPath(s.cfg.LogDir, runID)); err != nil && !os.IsNotExist(err) {
		s.log.Warn("heartbeat: remove run status file", "run", runID, "err", err)
	}
}
