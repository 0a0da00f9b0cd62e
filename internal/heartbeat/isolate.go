package heartbeat

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
)

// AgentUser is the account managed agent processes run as when it is not
// the server's own (serve --agent-user): the process gets Uid and Gid, no
// supplementary groups, and HOME=Home.
type AgentUser struct {
	Name     string
	Uid, Gid uint32
	Home     string
}

// passedEnv reports whether a variable of the server's environment is
// passed on to managed agents: only PATH, HOME, LANG, LC_*, TZ and TMPDIR.
// Everything else (database URLs, tokens, cloud credentials...) stays
// with the server.
func passedEnv(name string) bool {
	switch name {
	case "PATH", "HOME", "LANG", "TZ", "TMPDIR":
		return true
	}
	return strings.HasPrefix(name, "LC_")
}

// baseEnv is the part of a managed agent's environment taken from the
// server's (environ, as os.Environ returns it): the allowlisted variables
// of passedEnv, with HOME replaced by the agent user's home when agent
// processes run as another user (user not nil).
func baseEnv(environ []string, user *AgentUser) []string {
	env := make([]string, 0, 8)
	for _, kv := range environ {
		name, _, ok := strings.Cut(kv, "=")
		if !ok || !passedEnv(name) || (user != nil && name == "HOME") {
			continue
		}
		env = append(env, kv)
	}
	if user != nil && user.Home != "" {
		env = append(env, "HOME="+user.Home)
	}
	return env
}

// sysProcAttr is how a run's process starts: in a process group of its
// own (so the whole group can be signalled), and as u (see runUser) when
// not nil, with no supplementary groups. The server keeps the right to
// signal that group: it runs as root whenever u differs from its own uid.
func sysProcAttr(u *AgentUser) *syscall.SysProcAttr {
	a := &syscall.SysProcAttr{Setpgid: true}
	if u != nil {
		a.Credential = &syscall.Credential{Uid: u.Uid, Gid: u.Gid, Groups: []uint32{}}
	}
	return a
}

// runDir returns the working directory of a run's process: the adapter's
// cwd when it sets one (used as is, never created or removed), else
// WorkDir/<runID>, created empty here (mode 0700, owned by u, the run's
// user, when not nil). Rule: a directory created here is removed when the
// run's process group is gone (removeRunDir), whatever the run's outcome;
// an agent that needs files kept across runs sets cwd.
func (s *Scheduler) runDir(runID, cwd string, u *AgentUser) (string, error) {
	if cwd != "" {
		return cwd, nil
	}
	// The parent must be traversable by the agent user, never listable.
	parentMode := os.FileMode(0o700)
	if u != nil {
		parentMode = 0o711
	}
	if err := os.MkdirAll(s.cfg.WorkDir, parentMode); err != nil {
		return "", fmt.Errorf("run working directory: %w", err)
	}
	if err := os.Chmod(s.cfg.WorkDir, parentMode); err != nil {
		return "", fmt.Errorf("run working directory: %w", err)
	}
	dir := filepath.Join(s.cfg.WorkDir, filepath.Base(runID))
	if err := os.RemoveAll(dir); err != nil {
		return "", fmt.Errorf("run working directory: %w", err)
	}
	if err := os.Mkdir(dir, 0o700); err != nil {
		return "", fmt.Errorf("run working directory: %w", err)
	}
	if u != nil {
		if err := os.Chown(dir, int(u.Uid), int(u.Gid)); err != nil {
			_ = os.Remove(dir)
			return "", fmt.Errorf("run working directory: %w", err)
		}
	}
	return dir, nil
}

// removeRunDir removes the working directory runDir created for runID, if
// any (an adapter's own cwd is never under WorkDir/<runID>).
func (s *Scheduler) removeRunDir(runID string) {
	dir := filepath.Join(s.cfg.WorkDir, filepath.Base(runID))
	if err := os.RemoveAll(dir); err != nil {
		s.log.Warn("heartbeat: remove run working directory", "run", runID, "dir", dir, "err", err)
	}
}
