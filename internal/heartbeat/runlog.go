package heartbeat

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"github.com/clasp-dev/clasp/internal/secret"
)

// DefaultMaxLogBytes caps a run's log (stdout and stderr together).
const DefaultMaxLogBytes = 1 << 20

// truncatedMark ends a log that reached its cap.
const truncatedMark = "\n[clasp: run log truncated at %d bytes]\n"

// maxHeldCredential is the longest credential-looking text a run log
// holds back while waiting for its end (see secret.Pending).
const maxHeldCredential = 512

// cappedLog writes a run's output to its file up to max bytes, then drops
// the rest after one line saying so. Every clasp credential in the output
// (and each of secrets, by value) is masked before it reaches the file: a
// credential split across writes is held back until it is complete (or
// the log closes). Safe for concurrent writes (os/exec copies stdout and
// stderr from two goroutines when they differ).
type cappedLog struct {
	mu      sync.Mutex
	f       *os.File
	n, max  int64
	dropped bool
	secrets []string // masked by value (the run's own token)
	pend    []byte   // held back: may be the start of a credential
}

// openLogFile opens (creating it, mode 0600) run runID's log in dir for
// appending, for the run's shim to write.
func openLogFile(dir, runID string) (*os.File, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("run log dir: %w", err)
	}
	f, err := os.OpenFile(LogPath(dir, runID), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return nil, fmt.Errorf("run log: %w", err)
	}
	return f, nil
}

// newCappedLog returns a cappedLog of max bytes over f (opened for
// appending), counting what f already holds: a log already past its cap
// (truncated) takes nothing more.
func newCappedLog(f *os.File, max int64) *cappedLog {
	var n int64
	if st, err := f.Stat(); err == nil {
		n = st.Size()
	}
	return &cappedLog{f: f, n: n, max: max, dropped: n > max}
}

// LogPath is the file of run runID's log in dir.
func LogPath(dir, runID string) string { return filepath.Join(dir, filepath.Base(runID)+".log") }

func (l *cappedLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.dropped {
		return len(p), nil
	}
	data := append(l.pend, p...)
	hold := secret.Pending(data, maxHeldCredential, l.secrets...)
	l.pend = append([]byte(nil), data[len(data)-hold:]...)
	l.write(secret.MaskBytes(data[:len(data)-hold], l.secrets...))
	return len(p), nil
}

// write appends masked output p to the file within the cap.
func (l *cappedLog) write(p []byte) {
	if l.dropped || len(p) == 0 {
		return
	}
	room := l.max - l.n
	w := p
	if int64(len(w)) > room {
		w = w[:max(room, 0)]
	}
	k, err := l.f.Write(w)
	l.n += int64(k)
	if err != nil {
		return // the agent's output must never block on its log
	}
	if len(w) < len(p) {
		l.dropped = true
		fmt.Fprintf(l.f, truncatedMark, l.max)
	}
}

// Close writes what was held back (masked) and closes the file.
func (l *cappedLog) Close() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.write(secret.MaskBytes(l.pend, l.secrets...))
	l.pend = nil
	return l.f.Close()
}

// The tail of a failed run's log that its error carries: what a person
// reading the run (or the comment of an escalation, RULES.md E3) needs to
// see why it failed, without opening the log.
const (
	tailLines = 5
	tailBytes = 320
)

// logTail returns the last lines of run runID's log in dir (at most
// tailLines non-empty lines and about tailBytes bytes, read from the
// file's last 4 KiB), joined by " | "; "" when the log is missing or
// empty. The log holds no secret: the run's token was masked as it was
// written.
func logTail(dir, runID string) string {
	f, err := os.Open(LogPath(dir, runID))
	if err != nil {
		return ""
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return ""
	}
	const window = 4096
	off := max(st.Size()-window, 0)
	buf := make([]byte, st.Size()-off)
	if _, err := f.ReadAt(buf, off); err != nil && !errors.Is(err, io.EOF) {
		return ""
	}
	var lines []string
	for _, l := range strings.Split(strings.ToValidUTF8(string(buf), "\uFFFD"), "\n") {
		if l = strings.TrimSpace(l); l != "" {
			lines = append(lines, l)
		}
	}
	if off > 0 && len(lines) > 0 {
		lines = lines[1:] // the first may be cut in the middle
	}
	lines = lines[max(len(lines)-tailLines, 0):]
	out := strings.Join(lines, " | ")
	if len(out) > tailBytes {
		out = "…" + strings.ToValidUTF8(out[len(out)-tailBytes:], "")
	}
	return out
}

// withLogTail is msg followed by the tail of run runID's log in dir
// (logTail), when it has one.
func withLogTail(msg, dir, runID string) string {
	if t := logTail(dir, runID); t != "" {
		return msg + "; its log ends: " + t
	}
	return msg
}
