package clasp

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
)

// Adapter types an agent may have. Only "process" exists: the
// server runs the agent as a local process.
const AdapterProcess = "process"

// Invocation sources of server-managed runs: why the scheduler
// queued the run. "retry" is the one retry of a run whose process was lost.
const (
	InvocationTimer      = "timer"
	InvocationAssignment = "assignment"
	InvocationOnDemand   = "on_demand"
	InvocationRetry      = "retry"
	// The wakes of dependencies (RULES.md, Dependencies): the issue's last
	// unresolved blocker became done, or every child of a parent closed.
	// The server sends them; they cannot be asked for through the API.
	InvocationBlockersResolved = "issue_blockers_resolved"
	InvocationChildrenComplete = "issue_children_completed"
)

// Activity actions of the heartbeat scheduler.
const (
	ActionAgentAdapterSet      = "agent.adapter_set"          // {adapterType}
	ActionWakeRequested        = "agent.wake_requested"       // {wakeId, reason, issueId, outcome, runId, blockedByRunId}
	ActionWakePromoted         = "agent.wake_promoted"        // {wakeId, runId, issueId, endedRunId}
	ActionRunQueued            = "run.queued"                 // {agentId, issueId, reason, retryOfRunId, attempt}
	ActionIssueExecutionLocked = "issue.execution_locked"     // {runId, previousCheckoutRunId, previousExecutionRunId}
	ActionIssueLockMoved       = "issue.execution_lock_moved" // {fromRunId, toRunId, clearedCheckoutRunId}
)

// HeartbeatConfig says when the server wakes a process agent.
type HeartbeatConfig struct {
	Enabled           bool `json:"enabled"`
	IntervalSec       int  `json:"intervalSec"`       // timer wake period in seconds; 0: no timer wakes
	WakeOnAssignment  bool `json:"wakeOnAssignment"`  // wake when an issue is assigned to the agent
	MaxConcurrentRuns int  `json:"maxConcurrentRuns"` // running runs at once; default 1
}

// AdapterConfig is how the server runs an agent. Type "process":
// Command with Args in Cwd, Env added to the environment the server sets;
// TimeoutSec (0: none) bounds one run, after which the process group gets
// SIGTERM, then SIGKILL.
type AdapterConfig struct {
	Type       string            `json:"type"`
	Command    string            `json:"command"`
	Args       []string          `json:"args"`
	Cwd        string            `json:"cwd"`
	Env        map[string]string `json:"env"`
	TimeoutSec int               `json:"timeoutSec"`
	Heartbeat  HeartbeatConfig   `json:"heartbeat"`
}

// MaxAdapterConfigBytes bounds the JSON of an adapter config.
const MaxAdapterConfigBytes = 64 << 10

// Normalize validates c and fills defaults (maxConcurrentRuns 1). Errors:
// 400 invalid_request with details.field: an unknown adapter type
// (adapter.type), no command, negative or absurd numbers, env names that are
// empty or hold '='.
func (c *AdapterConfig) Normalize() error {
	switch c.Type {
	case AdapterProcess:
	case "":
		return InvalidField("type", "adapter type is required: %q is the only type.", AdapterProcess)
	default:
		return InvalidField("type", "unknown adapter type %q: %q is the only type.", c.Type, AdapterProcess)
	}
	if strings.TrimSpace(c.Command) == "" {
		return InvalidField("command", "a process adapter needs a command.")
	}
	if c.TimeoutSec < 0 || c.TimeoutSec > 7*24*3600 {
		return InvalidField("timeoutSec", "timeoutSec must be between 0 (none) and 604800.")
	}
	h := &c.Heartbeat
	if h.IntervalSec < 0 || h.IntervalSec > 7*24*3600 {
		return InvalidField("heartbeat.intervalSec", "heartbeat.intervalSec must be between 0 (no timer) and 604800.")
	}
	if h.MaxConcurrentRuns == 0 {
		h.MaxConcurrentRuns = 1
	}
	if h.MaxConcurrentRuns < 1 || h.MaxConcurrentRuns > 64 {
		return InvalidField("heartbeat.maxConcurrentRuns", "heartbeat.maxConcurrentRuns must be between 1 and 64.")
	}
	if strings.ContainsRune(c.Command, 0) {
		return InvalidField("command", "command contains a NUL byte; no program can be started with it.")
	}
	if !filepath.IsAbs(c.Command) {
		// A relative path would resolve against the server's directory
		// and a bare name against its PATH: neither is what the agent's
		// owner sees, and a wake would fail later with spawn_failed.
		return InvalidField("command", "command must be an absolute path to the program, not %q.", c.Command)
	}
	for i, a := range c.Args {
		if strings.ContainsRune(a, 0) {
			return InvalidField(fmt.Sprintf("args[%d]", i), "args[%d] contains a NUL byte; no program can be started with it.", i)
		}
	}
	if c.Cwd != "" && (!filepath.IsAbs(c.Cwd) || strings.ContainsRune(c.Cwd, 0)) {
		return InvalidField("cwd", "cwd must be an absolute directory path, not %q.", c.Cwd)
	}
	for k, v := range c.Env {
		if k == "" || strings.ContainsAny(k, "=\x00") {
			return InvalidField("env", "env name %q is not a valid environment variable name.", k)
		}
		if strings.ContainsRune(v, 0) {
			return InvalidField("env", "env %s contains a NUL byte.", k)
		}
		if strings.HasPrefix(k, "CLASP_") || strings.HasPrefix(k, "PAPERCLIP_") {
			return InvalidField("env", "env %s is set by the server for each run (CLASP_* and PAPERCLIP_* names are reserved).", k)
		}
	}
	if b, _ := json.Marshal(c); len(b) > MaxAdapterConfigBytes {
		return InvalidField("adapter", "the adapter config is larger than %d bytes.", MaxAdapterConfigBytes)
	}
	return nil
}
