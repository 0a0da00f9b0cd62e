package swarm

import (
	"fmt"
	"io"
	"strconv"
	"strings"
	"sync"
)

// Event names printed by Worker, one line each on stdout, in the form
// `event=<name> key=value ...` (values with spaces or quotes are Go-quoted).
// Run follows them to time its kills and count conflicts.
const (
	EventStarted    = "started"     // the process is up: agent=, pid=
	EventRunOpened  = "run_opened"  // run=
	EventCheckedOut = "checked_out" // issue=, run=, epoch=, from=inbox|todo: the work starts now
	EventConflict   = "conflict"    // issue=, run=, reason=: a checkout answered 409
	EventDone       = "done"        // issue=, run=, epoch=, sha256=: result and status done written in one PATCH by the run holding the lock at epoch
	EventLockLost   = "lock_lost"   // issue=, run=, code=: the PATCH answered 409, the lock was taken over
	EventBlocked    = "blocked"     // issue=, run=, error=: the work failed; the issue was set blocked with a comment saying why, its lock released
	EventRunLost    = "run_lost"    // run=, issue= if any: the run was swept under this process (a stall past the TTL); its work is dropped
	EventRunClosed  = "run_closed"  // run=, status=
	EventWaiting    = "waiting"     // issue=: an inbox issue is still held by a dead process's live lease
	EventExit       = "exit"        // reason=no_work|signal|error|work_failed, done=, conflicts=, blocked=
)

// Event is one parsed event line: Name is the value of "event", Fields the
// other key=value pairs.
type Event struct {
	Name   string
	Fields map[string]string
}

// ParseEvent parses a line written by an EventWriter. ok is false for any
// line that does not start with "event=".
func ParseEvent(line string) (ev Event, ok bool) {
	line = strings.TrimSpace(line)
	if !strings.HasPrefix(line, "event=") {
		return Event{}, false
	}
	ev.Fields = map[string]string{}
	for rest := line; rest != ""; {
		rest = strings.TrimLeft(rest, " ")
		k, after, found := strings.Cut(rest, "=")
		if !found || k == "" || strings.Contains(k, " ") {
			return Event{}, false
		}
		var v string
		if strings.HasPrefix(after, `"`) {
			q, err := strconv.QuotedPrefix(after)
			if err != nil {
				return Event{}, false
			}
			v, _ = strconv.Unquote(q)
			rest = after[len(q):]
		} else {
			v, rest, _ = strings.Cut(after, " ")
		}
		if k == "event" {
			ev.Name = v
		} else {
			ev.Fields[k] = v
		}
	}
	return ev, ev.Name != ""
}

// EventWriter prints event lines; it is safe for concurrent use, so the
// heartbeat goroutine and the main loop can both write.
type EventWriter struct {
	mu sync.Mutex
	w  io.Writer
}

// NewEventWriter returns an EventWriter on w (os.Stdout in a Worker).
func NewEventWriter(w io.Writer) *EventWriter { return &EventWriter{w: w} }

// Emit writes `event=name k1=v1 k2=v2 ...`; kv alternates keys and values
// (values formatted with %v). Keys are written in the order given.
func (e *EventWriter) Emit(name string, kv ...any) {
	var b strings.Builder
	b.WriteString("event=")
	b.WriteString(name)
	for i := 0; i+1 < len(kv); i += 2 {
		fmt.Fprintf(&b, " %v=%s", kv[i], quoteValue(fmt.Sprint(kv[i+1])))
	}
	b.WriteByte('\n')
	e.mu.Lock()
	defer e.mu.Unlock()
	_, _ = io.WriteString(e.w, b.String())
}

// quoteValue quotes v when it is empty or holds a space, quote or control
// character, so ParseEvent can split the line.
func quoteValue(v string) string {
	if v == "" || strings.ContainsAny(v, " \t\r\n\"=") {
		return strconv.Quote(v)
	}
	return v
}
